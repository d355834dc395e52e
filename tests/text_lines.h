// Splits printed text into its lines, for tests that compare what a formatter or a log printed
// line by line.
#pragma once

#include <istream>
#include <sstream>
#include <string>
#include <vector>

namespace kvcanary::testing {

// The lines of `in` up to its end, without their newlines.
inline std::vector<std::string> Lines(std::istream& in) {
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::istringstream in(text);
  return Lines(in);
}

}  // namespace kvcanary::testing
