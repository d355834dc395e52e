// ThrownMessage<E>(body): runs `body`, requires it to throw E, and returns the message, so a test
// can compare the whole text. ErrorMessage(body) is the case of kvcanary::Error.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {

// `thrown_name` names E in the failure when nothing is thrown.
template <typename Thrown, typename Body>
std::string ThrownMessage(Body body, const char* thrown_name) {
  try {
    body();
  } catch (const Thrown& error) {
    return error.what();
  }
  ADD_FAILURE() << "no " << thrown_name << " thrown";
  return "";
}

template <typename Body>
std::string ErrorMessage(Body body) {
  return ThrownMessage<Error>(body, "kvcanary::Error");
}

}  // namespace kvcanary::runtime
