#include "runtime/python/without_bpf.h"

#include "abi/preload/entry_codes.h"

namespace allocscope {

bool in_cpython_allocator(uint16_t fn) {
  switch (fn) {
    case AS_CODE_PYMEM_MALLOC:
    case AS_CODE_PYMEM_CALLOC:
    case AS_CODE_PYMEM_REALLOC:
    case AS_CODE_PYOBJ_MALLOC:
    case AS_CODE_PYOBJ_CALLOC:
    case AS_CODE_PYOBJ_REALLOC:
      return true;
    default:
      return false;
  }
}

void PythonWithoutBpf::place_frames(pid_t, std::span<const Mapping>, std::span<const uint8_t>, uint16_t fn,
                                    std::vector<uint64_t>&) {
  samples_ += in_cpython_allocator(fn);
}

std::vector<std::string> PythonWithoutBpf::warnings(KernelCounters) const {
  if (!samples_) return {};
  return {
      "python: without BPF, Python functions are not read: stacks in CPython (" + std::to_string(samples_) +
      " samples in its allocator) show the interpreter's C frames; with root, or CAP_BPF and CAP_PERFMON, "
      "they show the Python frames"};
}

std::vector<RuntimePath> PythonWithoutBpf::paths() const {
  if (!samples_) return {};
  return {{"python", "", "C frames only (no Python frames without BPF)"}};
}

}  // namespace allocscope
