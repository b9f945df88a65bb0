// Fallible results: a value or an Error that names the operation, the object
// and the cause. Result is [[nodiscard]]: a failure cannot be dropped unseen.
#pragma once

#include <cstdint>
#include <expected>
#include <iosfwd>
#include <string>
#include <utility>

namespace allocscope {

// What a failure means to callers that act on it, where no system call's
// errno says it (then `code` is 0).
enum class Cause : uint8_t {
  Other,
  NotElf,           // the file is no ELF file (a script, a JIT's code in a memfd)
  NoAllocator,      // the file defines no allocator entry point to probe
  NoPythonRuntime,  // the file holds no CPython runtime
};

struct Error {
  std::string message;
  int code = 0;  // errno of the system call that failed; 0 when none did
  Cause cause = Cause::Other;
};

template <typename T>
class [[nodiscard]] Result : public std::expected<T, Error> {
 public:
  using std::expected<T, Error>::expected;
};

inline std::unexpected<Error> fail(std::string message, int code = 0) {
  return std::unexpected(Error{std::move(message), code});
}
inline std::unexpected<Error> fail(std::string message, Cause cause) {
  return std::unexpected(Error{std::move(message), 0, cause});
}
inline std::unexpected<Error> fail(Error error) { return std::unexpected(std::move(error)); }

// "what: strerror(err)", keeping err as the code.
std::unexpected<Error> fail_errno(const std::string& what, int err);
std::string errno_message(const std::string& what, int err);

// For test assertions and logs: the message.
std::ostream& operator<<(std::ostream& out, const Error& error);

}  // namespace allocscope
