#include "agent/listen_address.h"

#include <arpa/inet.h>

#include <cerrno>
#include <charconv>

namespace allocscope {

bool ListenAddress::loopback() const {
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return host == "::1" || host == "localhost";
}

Result<ListenAddress> parse_listen(std::string_view text) {
  auto bad = [&](const char* why) { return fail("--listen " + std::string(text) + ": " + why, EINVAL); };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("expected HOST:PORT or :PORT");
  ListenAddress a;
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.starts_with('[')) {
    if (!host.ends_with(']')) return bad("an IPv6 address goes in brackets: [::1]:6060");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 address goes in brackets: [::1]:6060");
  }
  a.host = host.empty() ? "127.0.0.1" : std::string(host);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), a.port);
  if (ec != std::errc() || end != port.data() + port.size() || a.port < 1 || a.port > 65535)
    return bad("the port is a number from 1 to 65535");
  in_addr v4{};
  in6_addr v6{};
  if (a.host != "localhost" && inet_pton(AF_INET, a.host.c_str(), &v4) != 1 &&
      inet_pton(AF_INET6, a.host.c_str(), &v6) != 1)
    return bad("the host is an IP address (or localhost)");
  return a;
}

}  // namespace allocscope
