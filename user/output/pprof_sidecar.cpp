#include "output/pprof_sidecar.h"

#include <charconv>

#include "output/sample_labels.h"

namespace allocscope {
namespace {

template <typename T>
bool parse_number(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// "KEY=NUM KEY=NUM ...": one sample's extra figures.
bool apply_figures(std::string_view text, StackTotals& t) {
  bool whole = true;
  while (!text.empty()) {
    size_t space = text.find(' ');
    std::string_view item = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
    size_t eq = item.find('=');
    int64_t num = 0;
    if (eq == std::string_view::npos || !parse_number(item.substr(eq + 1), num) ||
        !apply_extra_label(item.substr(0, eq), num, t))
      whole = false;
  }
  return whole;
}

bool apply_line(std::string_view line, Recording& r) {
  if (line.size() < 2 || line[1] != ' ') return false;
  std::string_view rest = line.substr(2);
  size_t space = rest.find(' ');
  if (space == std::string_view::npos) return false;
  std::string_view first = rest.substr(0, space), second = rest.substr(space + 1);
  switch (line[0]) {
    case 'c': {
      uint64_t value = 0;
      if (!parse_number(second, value)) return false;
      r.counters.emplace_back(std::string(first), value);
      return true;
    }
    case 'p':
      r.paths.emplace_back(std::string(first), std::string(second));
      return true;
    case 's': {
      size_t index = 0;
      if (!parse_number(first, index) || index >= r.samples.size()) return false;
      return apply_figures(second, r.samples[index].totals);
    }
    default:
      return false;
  }
}

}  // namespace

std::string encode_sidecar(const Recording& r) {
  std::string out(kSidecarMagic);
  for (const auto& [name, value] : r.counters) out += "c " + name + " " + std::to_string(value) + "\n";
  for (const auto& [name, value] : r.paths) {
    std::string one_line = value;
    for (char& c : one_line)
      if (c == '\n') c = ' ';
    out += "p " + name + " " + one_line + "\n";
  }
  for (size_t i = 0; i < r.samples.size(); ++i) {
    std::vector<NumLabel> figures = extra_labels(r.samples[i].totals);
    if (figures.empty()) continue;
    out += "s " + std::to_string(i);
    for (const NumLabel& f : figures) out += " " + f.key + "=" + std::to_string(f.num);
    out += "\n";
  }
  return out;
}

bool apply_sidecar(std::string_view entry, Recording& r) {
  if (!entry.starts_with(kSidecarMagic)) return false;
  entry.remove_prefix(kSidecarMagic.size());
  bool whole = true;
  while (!entry.empty()) {
    size_t nl = entry.find('\n');
    std::string_view line = entry.substr(0, nl);
    entry = nl == std::string_view::npos ? std::string_view() : entry.substr(nl + 1);
    if (!line.empty() && !apply_line(line, r)) whole = false;
  }
  return whole;
}

}  // namespace allocscope
