// Signal return trampolines: the code a signal handler returns to, which
// calls rt_sigreturn. Between a handler's frame and the code the signal
// interrupted; glibc's has call frame information marking it a signal
// frame, musl's none.
#pragma once

#include <elfutils/libdwfl.h>

#include <cstdint>
#include <vector>

#include "symbols/elf_file.h"

namespace allocscope {

// "mov $15, %rax; syscall": the rt_sigreturn call, as libunwind knows it.
inline constexpr uint8_t kSigreturnCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

// Whether the return address one byte after `addr` (a module address of
// `mod`, at `file_offset` in `elf`) is a signal trampoline: by its call
// frame information, or by its code.
bool is_signal_trampoline(Dwfl_Module* mod, Elf* elf, uint64_t addr, uint64_t file_offset);

// File offsets in [from, to) of `f` where kSigreturnCode starts, the bytes
// read `chunk` at a time (at least the code's size; at most
// ElfFile::kMaxRead): read, not through the file's mapping, which left all
// of a large library's code (LLVM's: 108 MB) in allocscope's resident
// memory while its table was built.
std::vector<uint64_t> sigreturn_code_offsets(const ElfFile& f, uint64_t from, uint64_t to,
                                             size_t chunk = ElfFile::kMaxRead);

}  // namespace allocscope
