#include "runtime/go/build.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "symbols/elf_file.h"

namespace allocscope {
namespace {

constexpr char kMagic[] = "\xff Go buildinf:";  // 14 bytes, then pointer size and flags
constexpr size_t kHeader = 32;
constexpr uint8_t kInlineStrings = 2;  // Go 1.18 on: the version follows the header
constexpr uint64_t kMaxVersion = 64;   // "go1.24.1 X:nocoverageredesign" is far shorter

}  // namespace

std::optional<uint64_t> go_uvarint(std::span<const uint8_t> bytes, size_t* at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    uint8_t b = bytes[(*at)++];
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  return std::nullopt;
}

std::optional<GoBuild> parse_go_buildinfo(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, sizeof kMagic - 1) != 0)
    return std::nullopt;
  if (!(bytes[15] & kInlineStrings)) return GoBuild{};
  size_t at = kHeader;
  auto n = go_uvarint(bytes, &at);
  if (!n || *n > kMaxVersion || *n > bytes.size() - at) return std::nullopt;
  return GoBuild{std::string(reinterpret_cast<const char*>(bytes.data() + at), size_t(*n))};
}

std::optional<GoBuild> go_build(const ElfFile& elf) {
  Elf_Scn* scn = find_section(elf.elf(), ".go.buildinfo");
  GElf_Shdr sh;
  if (!scn || !gelf_getshdr(scn, &sh)) return std::nullopt;
  auto bytes = elf.read(sh.sh_offset, size_t(std::min<uint64_t>(sh.sh_size, kHeader + 10 + kMaxVersion)));
  return bytes ? parse_go_buildinfo(*bytes) : std::nullopt;
}

}  // namespace allocscope
