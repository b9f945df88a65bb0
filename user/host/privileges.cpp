#include "host/privileges.h"

#include <sys/resource.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace allocscope {
namespace {

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value after "Key:" on its own line, spaces skipped.
std::string_view field(std::string_view text, std::string_view key) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end == std::string_view::npos ? text.npos : end - at);
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') {
      line.remove_prefix(key.size() + 1);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      return line;
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return {};
}

template <typename T>
std::optional<T> number(std::string_view s, int base) {
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  return v;
}

}  // namespace

Privileges parse_privileges(std::string_view status) {
  Privileges p;
  // "Uid:\treal\teffective\tsaved\tfs"
  std::string_view uid = field(status, "Uid");
  size_t sep = uid.find_first_of(" \t");
  if (sep != std::string_view::npos) {
    std::string_view rest = uid.substr(sep);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    p.euid = number<uint32_t>(rest, 10);
  }
  p.capabilities = number<uint64_t>(field(status, "CapEff"), 16);
  return p;
}

Privileges current_privileges() { return parse_privileges(read_text("/proc/self/status")); }

std::optional<std::string> parse_lockdown(std::string_view text) {
  size_t open = text.find('['), close = text.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return std::nullopt;
  return std::string(text.substr(open + 1, close - open - 1));
}

std::optional<std::string> current_lockdown() {
  return parse_lockdown(read_text("/sys/kernel/security/lockdown"));
}

std::optional<uint64_t> memlock_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return uint64_t(r.rlim_cur);
}

std::optional<int> perf_event_paranoid() {
  std::string text = read_text("/proc/sys/kernel/perf_event_paranoid");
  return number<int>(text, 10);  // from_chars stops at the newline
}

bool is_initial_uid_map(std::string_view uid_map) {
  unsigned long long inside = 1, outside = 1, count = 0;
  std::string text(uid_map);
  int n = std::sscanf(text.c_str(), "%llu %llu %llu", &inside, &outside, &count);
  return n == 3 && inside == 0 && outside == 0 && count == 4294967295ULL &&
         text.find('\n') + 1 >= text.size();  // one line only
}

bool in_initial_user_namespace() {
  std::ifstream in("/proc/self/uid_map");
  std::stringstream text;
  text << in.rdbuf();
  return !in || is_initial_uid_map(text.str());  // unreadable (no user namespaces): the initial one
}

}  // namespace allocscope
