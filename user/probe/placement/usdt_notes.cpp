#include "probe/placement/usdt_notes.h"

#include <elf.h>
#include <gelf.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "allocscope.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

// A stapsdt note's description: three addresses (probe, base, semaphore),
// then the provider, the name and the arguments, each NUL-terminated.
std::optional<UsdtNote> parse_note(const char* desc, size_t size) {
  constexpr size_t kAddresses = 3 * sizeof(uint64_t);
  if (size <= kAddresses) return std::nullopt;
  UsdtNote n;
  std::memcpy(&n.pc, desc, sizeof n.pc);
  std::memcpy(&n.semaphore, desc + 2 * sizeof(uint64_t), sizeof n.semaphore);
  std::string_view rest(desc + kAddresses, size - kAddresses);
  for (std::string* field : {&n.provider, &n.name, &n.args}) {
    size_t end = rest.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    *field = std::string(rest.substr(0, end));
    rest.remove_prefix(end + 1);
  }
  return n;
}

}  // namespace

std::vector<UsdtNote> usdt_notes(const ElfFile& file) {
  std::vector<UsdtNote> out;
  Elf* elf = file.elf();
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    const char* name = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!name || std::strcmp(name, ".note.stapsdt") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    GElf_Nhdr note;
    size_t offset = 0, name_at, desc_at;
    while ((offset = gelf_getnote(data, offset, &note, &name_at, &desc_at)) > 0) {
      if (note.n_type != 3 || note.n_namesz != sizeof "stapsdt" ||
          std::memcmp(static_cast<const char*>(data->d_buf) + name_at, "stapsdt", note.n_namesz) != 0)
        continue;
      if (auto n = parse_note(static_cast<const char*>(data->d_buf) + desc_at, note.n_descsz))
        out.push_back(std::move(*n));
    }
  }
  return out;
}

Result<bool> has_in_process_probes(const std::string& path) {
  auto file = ElfFile::open(path);
  if (!file) return fail(file.error());
  return has_in_process_probes(*file);
}

bool has_in_process_probes(const ElfFile& file) {
  for (const UsdtNote& n : usdt_notes(file))
    if (n.provider == AS_USDT_PROVIDER && n.name == "alloc") return true;
  return false;
}

}  // namespace allocscope
