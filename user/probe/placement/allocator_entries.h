// The allocator entry points allocscope knows, by symbol: the C family, C23's
// sized frees, jemalloc's, tcmalloc's and mimalloc's APIs, and the C++
// operators new and delete. Each has a kind (enum as_fn: how its arguments
// carry the size and the pointer) and an entry code the kernel reports with
// each sample (as_fn_code), from which the leaf frame is named.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "allocscope.h"

namespace allocscope {

struct AllocatorEntry {
  const char* symbol;  // as the ELF symbol tables spell it (C++ operators mangled)
  as_fn kind;
  bool probed = true;  // false: a name for in-process samples only
};

// Every known entry point; index i has entry code (i + 1) << AS_FN_ENTRY_SHIFT
// | kind. Code 0's entries (a plain kind) are the C library's own.
const AllocatorEntry* allocator_entry(std::string_view symbol);
uint16_t entry_code(const AllocatorEntry& e);
// The C name of an enum as_fn entry point ("malloc", "runtime.mallocgc");
// "?" for a value out of range.
const char* as_fn_name(int fn);
// Go's runtime entry points: mallocgc, mProf_Malloc, freeSpecial.
inline bool is_go_entry(as_fn kind) {
  return kind == AS_FN_GO_MALLOC || kind == AS_FN_GO_PROFILE || kind == AS_FN_GO_FREE;
}
// "malloc", "tc_malloc", "operator new(unsigned long)": the leaf frame's name.
std::string entry_name(uint16_t code);
// Whether the symbol makes its file an allocator (it defines a malloc-kind
// entry point such as malloc, mallocx, tc_malloc or mi_malloc).
bool defines_allocator(std::string_view symbol);

}  // namespace allocscope
