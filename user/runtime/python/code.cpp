#include "runtime/python/code.h"

#include <algorithm>
#include <cstring>

#include "base/utf8.h"

namespace allocscope {
namespace {

constexpr uint64_t kMaxName = 4096;          // characters of a name or file kept
constexpr uint64_t kMaxLineTable = 1 << 20;  // bytes of a location table read

template <typename T>
bool read_value(const ReadMemory& read, uint64_t addr, T* out) {
  return read(addr, std::span<uint8_t>(reinterpret_cast<uint8_t*>(out), sizeof(T)));
}

// A compact str object (every name and file name is one) as UTF-8.
std::optional<std::string> read_str(const PythonObjectLayout& l, uint64_t addr, const ReadMemory& read) {
  uint64_t length = 0;
  uint32_t state = 0;
  if (!addr || !read_value(read, addr + l.unicode_length, &length) ||
      !read_value(read, addr + l.unicode_state, &state))
    return std::nullopt;
  uint32_t kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) return std::nullopt;
  length = std::min(length, kMaxName);
  std::vector<uint8_t> data(length * kind);
  if (!data.empty() && !read(addr + (ascii ? l.ascii_size : l.compact_size), data)) return std::nullopt;
  if (ascii) {  // a string freed and its memory reused meanwhile shows: bytes no ASCII text has
    if (std::any_of(data.begin(), data.end(), [](uint8_t b) { return b == 0 || b >= 0x80; }))
      return std::nullopt;
    return std::string(data.begin(), data.end());
  }
  std::string out;
  for (uint64_t i = 0; i < length; ++i) {
    uint32_t c = 0;
    std::memcpy(&c, data.data() + i * kind, kind);  // little-endian: the low bytes
    append_utf8(out, c);
  }
  return out;
}

std::optional<std::vector<uint8_t>> read_bytes(const PythonObjectLayout& l, uint64_t addr,
                                               const ReadMemory& read) {
  int64_t size = 0;
  if (!addr || !read_value(read, addr + l.bytes_size, &size) || size < 0 || uint64_t(size) > kMaxLineTable)
    return std::nullopt;
  std::vector<uint8_t> data(static_cast<size_t>(size));
  if (!data.empty() && !read(addr + l.bytes_data, data)) return std::nullopt;
  return data;
}

// The location table's variable-length integers: 6 bits a byte, low first,
// bit 6 set on every byte but the last.
uint32_t varint(std::span<const uint8_t> t, size_t& i) {
  if (i >= t.size()) return 0;
  uint8_t b = t[i++];
  uint32_t v = b & 63, shift = 0;
  while ((b & 64) && i < t.size() && shift < 26) {
    b = t[i++];
    shift += 6;
    v |= uint32_t(b & 63) << shift;
  }
  return v;
}

int32_t svarint(std::span<const uint8_t> t, size_t& i) {
  uint32_t v = varint(t, i);
  return (v & 1) ? -int32_t(v >> 1) : int32_t(v >> 1);
}

}  // namespace

std::optional<PythonCode> read_python_code(const PythonObjectLayout& l, uint64_t code_type, uint64_t addr,
                                           uint32_t stamp, const ReadMemory& read) {
  uint64_t type = 0, filename = 0, qualname = 0, linetable = 0;
  PythonCode code;
  if (!read_value(read, addr + l.ob_type, &type) || type != code_type) return std::nullopt;
  if (!read_value(read, addr + l.code_first_line, &code.first_line) ||
      !read_value(read, addr + l.code_filename, &filename) ||
      AS_PY_CODE_STAMP(code.first_line, filename) != stamp)
    return std::nullopt;
  if (l.code_first_traceable && !read_value(read, addr + l.code_first_traceable, &code.first_traceable))
    return std::nullopt;
  if (!read_value(read, addr + l.code_qualname, &qualname) ||
      !read_value(read, addr + l.code_linetable, &linetable))
    return std::nullopt;
  auto file = read_str(l, filename, read), name = read_str(l, qualname, read);
  auto table = read_bytes(l, linetable, read);
  if (!file || !name || !table) return std::nullopt;
  code.kind = l.line_table;
  code.filename = std::move(*file);
  code.qualname = std::move(*name);
  code.linetable = std::move(*table);
  return code;
}

namespace {

// 3.11 on: entries of a run of code units each, with the line's change.
int32_t line_from_locations(const PythonCode& code, uint32_t instr) {
  std::span<const uint8_t> t = code.linetable;
  int32_t line = code.first_line;
  uint64_t start = 0;
  size_t i = 0;
  while (i < t.size()) {
    uint8_t head = t[i++];
    if (!(head & 0x80)) return 0;  // not an entry's first byte: a table we misread
    int kind = (head >> 3) & 15;
    uint64_t units = (head & 7) + 1;
    bool none = kind == 15;
    if (kind == 14) {  // long form: line delta, end line delta, column, end column
      line += svarint(t, i);
      varint(t, i), varint(t, i), varint(t, i);
    } else if (kind == 13) {  // no column
      line += svarint(t, i);
    } else if (kind >= 10 && kind <= 12) {  // one line, two column bytes
      line += kind - 10;
      i += 2;
    } else if (kind < 10) {  // short form: same line, one column byte
      i += 1;
    }
    if (instr < start + units) return none ? 0 : line;
    start += units;
  }
  return 0;
}

// 3.8, 3.9 (co_lnotab): pairs of a byte offset's increment and the line's
// (signed); the line of an offset is the last reached at or before it.
int32_t line_from_line_numbers(const PythonCode& code, uint64_t offset) {
  std::span<const uint8_t> t = code.linetable;
  int32_t line = code.first_line;
  uint64_t at = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    at += t[i];
    if (at > offset) break;
    line += int8_t(t[i + 1]);
  }
  return line;
}

// 3.10 (co_linetable): pairs of a range's length in bytes and the line's
// change from the last range with a line (-128: a range without).
int32_t line_from_address_ranges(const PythonCode& code, uint64_t offset) {
  std::span<const uint8_t> t = code.linetable;
  int32_t line = code.first_line;
  uint64_t end = 0;
  for (size_t i = 0; i + 1 < t.size(); i += 2) {
    int8_t delta = int8_t(t[i + 1]);
    if (delta != -128) line += delta;
    end += t[i];
    if (offset < end) return delta == -128 ? 0 : line;
  }
  return 0;
}

}  // namespace

int32_t python_line(const PythonCode& code, uint32_t instr) {
  switch (code.kind) {
    case PythonLineTable::kLineNumbers:
      return line_from_line_numbers(code, uint64_t(instr) * 2);
    case PythonLineTable::kAddressRanges:
      return line_from_address_ranges(code, uint64_t(instr) * 2);
    case PythonLineTable::kLocations:
      break;
  }
  return line_from_locations(code, instr);
}

}  // namespace allocscope
