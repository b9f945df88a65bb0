// Fallible results: a value or a message that names the operation, the object
// and the cause.
#pragma once

#include <expected>
#include <string>

namespace allocscope {

template <typename T>
using Result = std::expected<T, std::string>;

inline std::unexpected<std::string> fail(std::string message) { return std::unexpected(std::move(message)); }

// "what: strerror(err)".
std::string errno_message(const std::string& what, int err);

}  // namespace allocscope
