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
#include <string_view>

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

// Runs `check`; an Error it throws is rethrown with `context` and ": " after the "kv-canary: "
// prefix, in the same category: a call of several parts (a fused stage) names the part whose
// argument was wrong, where each part's own message names the argument only.
template <typename Check>
void CheckInContext(std::string_view context, Check&& check) {
  try {
    check();
  } catch (const Error& error) {
    constexpr std::string_view kPrefix = "kv-canary: ";
    std::string_view message = error.what();
    if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
    std::string contextual;
    contextual.append(kPrefix).append(context).append(": ").append(message);
    throw Error(contextual, error.category());
  }
}

}  // namespace kvcanary
