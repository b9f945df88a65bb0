#include "output/text_format.h"

#include <cstdio>

#include "base/units.h"

namespace allocscope {

std::string format_amount(double v, Metric m) {
  if (metric_is_bytes(m)) return format_bytes(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string format_duration_ns(double ns) {
  char buf[32];
  if (ns < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e6)
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 1e9)
    std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  return buf;
}

std::string fit_width(const std::string& line, size_t width) {
  auto is_continuation = [](char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; };
  size_t chars = 0, cut = 0, keep = width > 3 ? width - 3 : 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (is_continuation(line[i])) continue;
    if (chars == keep) cut = i;
    ++chars;
  }
  if (width == 0 || chars <= width) return line;
  return line.substr(0, cut) + std::string("...").substr(0, width - keep);
}

std::string printable(const std::string& name) {
  std::string out;
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace allocscope
