#include "host/perf_map.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace allocscope {
namespace {

bool parse_hex(std::string_view& text, uint64_t* out) {
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out, 16);
  if (ec != std::errc() || end == text.data()) return false;
  text.remove_prefix(size_t(end - text.data()));
  return !text.empty() && text.front() == ' ';
}

}  // namespace

std::vector<JitSymbol> parse_perf_map(std::string_view text) {
  std::map<uint64_t, JitSymbol> by_start;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    uint64_t start, size;
    if (!parse_hex(line, &start)) continue;
    line.remove_prefix(1);
    if (!parse_hex(line, &size) || size == 0) continue;
    line.remove_prefix(1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) by_start[start] = {start, start + size, std::string(line)};
  }
  std::vector<JitSymbol> out;
  for (auto& [start, s] : by_start) out.push_back(std::move(s));
  return out;
}

const JitSymbol* find_jit_symbol(const std::vector<JitSymbol>& symbols, uint64_t addr) {
  auto it = std::upper_bound(symbols.begin(), symbols.end(), addr,
                             [](uint64_t a, const JitSymbol& s) { return a < s.start; });
  if (it == symbols.begin()) return nullptr;
  --it;
  return addr < it->end ? &*it : nullptr;
}

}  // namespace allocscope
