// --listen: "HOST:PORT", ":PORT" (loopback), "[V6]:PORT". Pure logic.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace allocscope {

struct ListenAddress {
  std::string host;  // for bind: "127.0.0.1", "0.0.0.0", "::1"
  int port = 0;
  bool loopback() const;
};
Result<ListenAddress> parse_listen(std::string_view text);

}  // namespace allocscope
