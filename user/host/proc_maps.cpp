#include "host/proc_maps.h"

#include <algorithm>
#include <charconv>

namespace allocscope {
namespace {

std::string_view next_field(std::string_view& line) {
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  size_t end = line.find(' ');
  std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

template <typename T>
bool parse_int(std::string_view s, T& out, int base) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

bool parse_line(std::string_view line, Mapping& m) {
  std::string_view range = next_field(line), perms = next_field(line), offset = next_field(line),
                   dev = next_field(line), inode = next_field(line);
  size_t dash = range.find('-'), colon = dev.find(':');
  if (dash == std::string_view::npos || colon == std::string_view::npos || perms.size() < 4) return false;
  if (!parse_int(range.substr(0, dash), m.start, 16) || !parse_int(range.substr(dash + 1), m.end, 16) ||
      !parse_int(offset, m.offset, 16) || !parse_int(dev.substr(0, colon), m.dev_major, 16) ||
      !parse_int(dev.substr(colon + 1), m.dev_minor, 16) || !parse_int(inode, m.inode, 10))
    return false;
  m.readable = perms[0] == 'r';
  m.writable = perms[1] == 'w';
  m.executable = perms[2] == 'x';
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  constexpr std::string_view kDeleted = " (deleted)";
  if (line.ends_with(kDeleted)) {
    m.deleted = true;
    line.remove_suffix(kDeleted.size());
  }
  m.path = std::string(line);
  return true;
}

}  // namespace

std::vector<Mapping> parse_maps(std::string_view text) {
  std::vector<Mapping> maps;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    Mapping m;
    if (parse_line(line, m)) maps.push_back(std::move(m));
  }
  std::sort(maps.begin(), maps.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
  return maps;
}

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr) {
  auto it = std::upper_bound(maps.begin(), maps.end(), addr,
                             [](uint64_t a, const Mapping& m) { return a < m.start; });
  if (it == maps.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

bool is_c_library_name(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') + 1);
  bool musl = base.starts_with("libc.musl-") || base.starts_with("ld-musl-");
  // glibc: libc.so.6, libc-2.31.so; musl: libc.musl-x86_64.so.1, ld-musl-x86_64.so.1.
  return base.starts_with("libc.so") || (base.starts_with("libc-") && base.ends_with(".so")) ||
         (musl && base.find(".so") != std::string_view::npos);
}

const Mapping* find_c_library(const std::vector<Mapping>& maps) {
  for (const Mapping& m : maps)
    if (m.executable && m.is_file() && is_c_library_name(m.path)) return &m;
  return nullptr;
}

}  // namespace allocscope
