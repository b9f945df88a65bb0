#include "base/result.h"

#include <cstring>
#include <ostream>

namespace allocscope {

std::string errno_message(const std::string& what, int err) { return what + ": " + std::strerror(err); }

std::unexpected<Error> fail_errno(const std::string& what, int err) {
  return fail(errno_message(what, err), err);
}

std::ostream& operator<<(std::ostream& out, const Error& error) { return out << error.message; }

}  // namespace allocscope
