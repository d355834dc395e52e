// ErrorMessage(body): runs `body`, requires it to throw kvcanary::Error, and returns the message,
// so a test can compare the whole text.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kvcanary/error.h"

namespace kvcanary::runtime {

template <typename Body>
std::string ErrorMessage(Body body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no kvcanary::Error thrown";
  return "";
}

}  // namespace kvcanary::runtime
