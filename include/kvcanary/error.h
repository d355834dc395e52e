// kvcanary::Error: the one exception type of the library.
//
// Misuse (a bad argument, an unsupported configuration, a CUDA launch error) throws Error from
// ops/ and above. Corruption found by a kernel is data (violation rows), never an exception.
// Every message starts with "kv-canary:" and names the argument, what was expected and what was
// given. Deriving from std::invalid_argument lets pybind11 map it to ValueError unchanged; a
// kType error becomes a class deriving from both ValueError and TypeError.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kvcanary {

class Error : public std::invalid_argument {
 public:
  enum class Category { kValue, kType };

  explicit Error(const std::string& message, Category category = Category::kValue)
      : std::invalid_argument(message), category_(category) {}

  Category category() const { return category_; }

 private:
  Category category_;
};

// Concatenates the parts with operator<< into an Error and throws it.
template <typename... Parts>
[[noreturn]] void ThrowError(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

template <typename... Parts>
[[noreturn]] void ThrowTypeError(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str(), Error::Category::kType);
}

}  // namespace kvcanary
