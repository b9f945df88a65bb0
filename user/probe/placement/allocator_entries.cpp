#include "probe/placement/allocator_entries.h"

#include <array>
#include <unordered_map>

#include "symbols/demangle.h"

namespace allocscope {
namespace {

// Aliases share an address (tcmalloc's malloc is tc_malloc, its operator new
// tc_new): the first name here of those at an address is the one probed and
// shown, so the standard names come first.
constexpr AllocatorEntry kEntries[] = {
    // The C family, in other objects than the C library.
    {"malloc", AS_FN_MALLOC},
    {"calloc", AS_FN_CALLOC},
    {"realloc", AS_FN_REALLOC},
    {"reallocarray", AS_FN_REALLOCARRAY},
    {"posix_memalign", AS_FN_POSIX_MEMALIGN},
    {"aligned_alloc", AS_FN_ALIGNED_ALLOC},
    {"memalign", AS_FN_MEMALIGN},
    {"valloc", AS_FN_VALLOC},
    {"pvalloc", AS_FN_PVALLOC},
    {"free", AS_FN_FREE},
    {"cfree", AS_FN_FREE},
    {"free_sized", AS_FN_FREE},
    {"free_aligned_sized", AS_FN_FREE},
    {"reallocf", AS_FN_REALLOC},
    // C++ operators (size or pointer first in every form)
    {"_Znwm", AS_FN_MALLOC},
    {"_Znam", AS_FN_MALLOC},
    {"_ZnwmRKSt9nothrow_t", AS_FN_MALLOC},
    {"_ZnamRKSt9nothrow_t", AS_FN_MALLOC},
    {"_ZnwmSt11align_val_t", AS_FN_MALLOC},
    {"_ZnamSt11align_val_t", AS_FN_MALLOC},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", AS_FN_MALLOC},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", AS_FN_MALLOC},
    {"_ZdlPv", AS_FN_FREE},
    {"_ZdaPv", AS_FN_FREE},
    {"_ZdlPvm", AS_FN_FREE},
    {"_ZdaPvm", AS_FN_FREE},
    {"_ZdlPvRKSt9nothrow_t", AS_FN_FREE},
    {"_ZdaPvRKSt9nothrow_t", AS_FN_FREE},
    {"_ZdlPvSt11align_val_t", AS_FN_FREE},
    {"_ZdaPvSt11align_val_t", AS_FN_FREE},
    {"_ZdlPvmSt11align_val_t", AS_FN_FREE},
    {"_ZdaPvmSt11align_val_t", AS_FN_FREE},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", AS_FN_FREE},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", AS_FN_FREE},
    // jemalloc (xallocx resizes in place and returns a size: not an allocation).
    {"mallocx", AS_FN_MALLOC},
    {"rallocx", AS_FN_REALLOC},
    {"sdallocx", AS_FN_FREE},
    {"dallocx", AS_FN_FREE},
    {"je_malloc", AS_FN_MALLOC},
    {"je_calloc", AS_FN_CALLOC},
    {"je_realloc", AS_FN_REALLOC},
    {"je_posix_memalign", AS_FN_POSIX_MEMALIGN},
    {"je_aligned_alloc", AS_FN_ALIGNED_ALLOC},
    {"je_memalign", AS_FN_MEMALIGN},
    {"je_valloc", AS_FN_VALLOC},
    {"je_free", AS_FN_FREE},
    {"je_mallocx", AS_FN_MALLOC},
    {"je_rallocx", AS_FN_REALLOC},
    {"je_sdallocx", AS_FN_FREE},
    {"je_dallocx", AS_FN_FREE},
    // tcmalloc
    {"tc_malloc", AS_FN_MALLOC},
    {"tc_malloc_skip_new_handler", AS_FN_MALLOC},
    {"tc_calloc", AS_FN_CALLOC},
    {"tc_realloc", AS_FN_REALLOC},
    {"tc_memalign", AS_FN_MEMALIGN},
    {"tc_posix_memalign", AS_FN_POSIX_MEMALIGN},
    {"tc_valloc", AS_FN_VALLOC},
    {"tc_pvalloc", AS_FN_PVALLOC},
    {"tc_new", AS_FN_MALLOC},
    {"tc_new_nothrow", AS_FN_MALLOC},
    {"tc_newarray", AS_FN_MALLOC},
    {"tc_newarray_nothrow", AS_FN_MALLOC},
    {"tc_new_aligned", AS_FN_MALLOC},
    {"tc_new_aligned_nothrow", AS_FN_MALLOC},
    {"tc_newarray_aligned", AS_FN_MALLOC},
    {"tc_newarray_aligned_nothrow", AS_FN_MALLOC},
    {"tc_free", AS_FN_FREE},
    {"tc_cfree", AS_FN_FREE},
    {"tc_free_sized", AS_FN_FREE},
    {"tc_delete", AS_FN_FREE},
    {"tc_delete_sized", AS_FN_FREE},
    {"tc_delete_nothrow", AS_FN_FREE},
    {"tc_delete_aligned", AS_FN_FREE},
    {"tc_delete_sized_aligned", AS_FN_FREE},
    {"tc_delete_aligned_nothrow", AS_FN_FREE},
    {"tc_deletearray", AS_FN_FREE},
    {"tc_deletearray_sized", AS_FN_FREE},
    {"tc_deletearray_nothrow", AS_FN_FREE},
    {"tc_deletearray_aligned", AS_FN_FREE},
    {"tc_deletearray_sized_aligned", AS_FN_FREE},
    {"tc_deletearray_aligned_nothrow", AS_FN_FREE},
    // mimalloc (size first in the aligned forms: malloc's kind)
    {"mi_malloc", AS_FN_MALLOC},
    {"mi_zalloc", AS_FN_MALLOC},
    {"mi_calloc", AS_FN_CALLOC},
    {"mi_mallocn", AS_FN_CALLOC},
    {"mi_realloc", AS_FN_REALLOC},
    {"mi_reallocn", AS_FN_REALLOCARRAY},
    {"mi_reallocf", AS_FN_REALLOC},
    {"mi_malloc_aligned", AS_FN_MALLOC},
    {"mi_zalloc_aligned", AS_FN_MALLOC},
    {"mi_calloc_aligned", AS_FN_CALLOC},
    {"mi_realloc_aligned", AS_FN_REALLOC},
    {"mi_new", AS_FN_MALLOC},
    {"mi_new_nothrow", AS_FN_MALLOC},
    {"mi_new_aligned", AS_FN_MALLOC},
    {"mi_new_aligned_nothrow", AS_FN_MALLOC},
    {"mi_free", AS_FN_FREE},
    {"mi_free_size", AS_FN_FREE},
    {"mi_free_aligned", AS_FN_FREE},
    {"mi_free_size_aligned", AS_FN_FREE},
    // CPython's allocator domains as the preload library wraps them: named,
    // never probed (in LTO builds their bodies are inlined into callers, and
    // the exported functions see a fraction of the calls).
    {"PyMem_Malloc", AS_FN_MALLOC, false},
    {"PyMem_Calloc", AS_FN_CALLOC, false},
    {"PyMem_Realloc", AS_FN_REALLOC, false},
    {"PyObject_Malloc", AS_FN_MALLOC, false},
    {"PyObject_Calloc", AS_FN_CALLOC, false},
    {"PyObject_Realloc", AS_FN_REALLOC, false},
    // A Java object the JVM sampled (the preload library's JVMTI agent).
    {"new", AS_FN_MALLOC, false},
};
constexpr size_t kCount = sizeof kEntries / sizeof kEntries[0];
static_assert(kCount < (1u << (16 - AS_FN_ENTRY_SHIFT)), "entry codes are 16 bits");

constexpr std::string_view kAllocatorMarks[] = {"malloc", "mallocx", "je_malloc", "tc_malloc", "mi_malloc"};

}  // namespace

const char* as_fn_name(int fn) {
  static const char* const names[AS_FN_COUNT] = {
      "malloc",
      "calloc",
      "realloc",
      "reallocarray",
      "posix_memalign",
      "aligned_alloc",
      "memalign",
      "valloc",
      "pvalloc",
      "free",
      "_exit",
      "runtime.mallocgc",
      "runtime.mProf_Malloc",
      "runtime.freeSpecial",
  };
  return fn >= 0 && fn < AS_FN_COUNT ? names[fn] : "?";
}

const AllocatorEntry* allocator_entry(std::string_view symbol) {
  static const std::unordered_map<std::string_view, const AllocatorEntry*> by_name = [] {
    std::unordered_map<std::string_view, const AllocatorEntry*> m;
    for (const AllocatorEntry& e : kEntries) m.emplace(e.symbol, &e);
    return m;
  }();
  auto it = by_name.find(symbol);
  return it == by_name.end() ? nullptr : it->second;
}

uint16_t entry_code(const AllocatorEntry& e) {
  return uint16_t(((&e - kEntries) + 1) << AS_FN_ENTRY_SHIFT | e.kind);
}

std::string entry_name(uint16_t code) {
  size_t index = code >> AS_FN_ENTRY_SHIFT;
  if (index == 0 || index > kCount) return as_fn_name(as_fn_kind(code));
  return demangle(kEntries[index - 1].symbol);
}

bool defines_allocator(std::string_view symbol) {
  for (std::string_view mark : kAllocatorMarks)
    if (symbol == mark) return true;
  return false;
}

}  // namespace allocscope
