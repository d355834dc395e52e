// Helpers of the sim_options tests: the message validation gives, and the expectation of a
// refusal.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sim/sim_options.h"

namespace kvcanary::sim {

// The message ValidateOptions throws for `options`, or "" when it accepts them.
inline std::string ValidationError(const SimOptions& options) {
  try {
    ValidateOptions(options);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

// REQUIRES of a test: `options` is rejected with a message containing `expected`.
inline void ExpectRejected(const SimOptions& options, const std::string& expected) {
  const std::string message = ValidationError(options);
  EXPECT_NE(message.find(expected), std::string::npos)
      << "expected a message containing '" << expected << "', got '" << message << "'";
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
}

}  // namespace kvcanary::sim
