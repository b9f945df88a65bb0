#include "symbols/signal_trampoline.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace allocscope {
namespace {

bool marked_signal_frame(Dwfl_Module* mod, uint64_t addr) {
  Dwarf_Addr cfi_bias = 0;
  Dwarf_CFI* cfi = mod ? dwfl_module_eh_cfi(mod, &cfi_bias) : nullptr;
  Dwarf_Frame* frame = nullptr;
  if (!cfi || dwarf_cfi_addrframe(cfi, addr - cfi_bias, &frame) != 0) return false;
  bool signal = false;
  Dwarf_Addr start = 0, end = 0;
  bool ok = dwarf_frame_info(frame, &start, &end, &signal) >= 0;
  std::free(frame);
  return ok && signal;
}

bool sigreturn_follows(Elf* elf, uint64_t file_offset) {
  Elf_Data* d =
      elf ? elf_getdata_rawchunk(elf, int64_t(file_offset + 1), sizeof kSigreturnCode, ELF_T_BYTE) : nullptr;
  return d && d->d_size == sizeof kSigreturnCode &&
         std::memcmp(d->d_buf, kSigreturnCode, sizeof kSigreturnCode) == 0;
}

}  // namespace

bool is_signal_trampoline(Dwfl_Module* mod, Elf* elf, uint64_t addr, uint64_t file_offset) {
  return marked_signal_frame(mod, addr) || sigreturn_follows(elf, file_offset);
}

std::vector<uint64_t> sigreturn_code_offsets(const ElfFile& f, uint64_t from, uint64_t to, size_t chunk) {
  constexpr size_t kOverlap = sizeof kSigreturnCode - 1;  // a match across two reads
  chunk = std::clamp(chunk, sizeof kSigreturnCode, ElfFile::kMaxRead);
  std::vector<uint64_t> out;
  for (uint64_t at = from; at < to;) {
    auto bytes = f.read(at, size_t(std::min<uint64_t>(chunk, to - at)));
    if (!bytes || bytes->size() < sizeof kSigreturnCode) break;
    const uint8_t *p = bytes->data(), *end = p + bytes->size();
    while (const void* hit = memmem(p, size_t(end - p), kSigreturnCode, sizeof kSigreturnCode)) {
      out.push_back(at + uint64_t(static_cast<const uint8_t*>(hit) - bytes->data()));
      p = static_cast<const uint8_t*>(hit) + sizeof kSigreturnCode;
    }
    if (at + bytes->size() >= to) break;
    at += bytes->size() - kOverlap;
  }
  return out;
}

}  // namespace allocscope
