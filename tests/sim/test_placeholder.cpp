#include <gtest/gtest.h>
// Replaced by the simulator tests.
TEST(SimPlaceholder, Builds) { SUCCEED(); }
