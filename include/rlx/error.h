// Typed errors for user-facing failures. Messages read "[where] expected …, got …".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace rlx {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value is out of range or inconsistent (bad shape, bad axis, bad attribute value).
class ValueError : public Error {
 public:
  using Error::Error;
};

// A dtype or attribute kind is wrong.
class TypeError : public Error {
 public:
  using Error::Error;
};

// The request is well formed but not implemented (missing rule, missing kernel).
class NotSupported : public Error {
 public:
  using Error::Error;
};

// Reading or writing a file or stream failed, or its contents are malformed.
class IoError : public Error {
 public:
  using Error::Error;
};

// A device runtime or library call failed (CUDA, cuBLAS, …); the message names the call.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// A device allocation failed even after the allocator gave its cached memory back. The
// process survives it: free tensors (or run smaller) and try again.
class OutOfMemory : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

// Concatenates anything that has operator<< into a string.
template <class... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

// Throws E with the message "[where] parts…".
template <class E, class... Args>
[[noreturn]] void fail(std::string_view where, Args&&... parts) {
  throw E(str_cat("[", where, "] ", std::forward<Args>(parts)...));
}

}  // namespace rlx
