#include "output/flame_text.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "base/units.h"

namespace allocscope::flame {
namespace {

// Length of the UTF-8 sequence at s[i] if it encodes a character XML 1.0
// allows, 0 otherwise (stray bytes, overlongs, surrogates, controls).
size_t xml_char_len(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return c >= 0x20 ? 1 : 0;
  size_t n = c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    unsigned char d = s[i + k];
    if ((d & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  bool bad = (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
             (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF;
  return bad ? 0 : n;
}

}  // namespace

bool is_clean(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = xml_char_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Symbol names are bytes from ELF files: anything XML cannot carry becomes
// U+FFFD, and line breaks become spaces because a tooltip's first line is
// the name.
std::string clean(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = xml_char_len(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += static_cast<unsigned char>(s[i]) < 0x20 ? " " : "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Escapes all five specials so the result is safe in text and in attributes.
void append_xml(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
}

// A JSON string for the script; <, > and ] are escaped so that no name can
// close the CDATA section or the script.
void append_json(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case ']':
        out += "\\u005d";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  out += '"';
}

// Fixed decimals without trailing zeros: coordinates are most of the file.
std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

// Enough digits that the script's layout from values stays exact at any zoom.
std::string precise(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Merged blocks' search values only feed a percentage.
std::string approx(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string format_value(double v, const std::string& unit) {
  if (unit == "bytes") return format_bytes(v);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return std::string(buf) + " " + unit;
}

std::string format_change(double delta, const std::string& unit) {
  return (delta < 0 ? "-" : "+") + format_value(std::fabs(delta), unit);
}

// Shares keep their decimals ("25.00%") so tooltips line up.
std::string percent(double part, double total, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, total > 0 ? 100 * part / total : 0);
  return buf;
}

// Whole characters that fit the frame, ".." when cut; the script applies the
// same rule after a zoom. Cuts never split a UTF-8 sequence.
std::string fit_label(std::string_view name, double width) {
  double fit = std::floor((width - 6) / kCharPx);
  if (!(fit >= 3)) return "";  // NaN too
  // Compared before the conversion: an infinite width (a malformed
  // profile's values) fits any name, and converts to no size_t.
  if (fit >= static_cast<double>(name.size())) return std::string(name);
  size_t n = static_cast<size_t>(fit);
  size_t cut = n - 2;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  return std::string(name.substr(0, cut)) + "..";
}

}  // namespace allocscope::flame
