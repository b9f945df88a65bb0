// CPython in a recording without BPF: no kernel walks its frames, so a
// sample in its allocator (the preload library wraps CPython's domains:
// PyMem_Malloc, PyObject_Malloc and their kin) shows the interpreter's C
// frames only. What this room says of them, once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace allocscope {

class PythonWithoutBpf : public Runtime {
 public:
  // Counts the samples taken in CPython's allocator (`fn`: their entry code).
  void place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> runtime_part,
                    uint16_t fn, std::vector<uint64_t>& ips) override;
  std::vector<std::string> warnings(KernelCounters kernel) const override;
  std::vector<RuntimePath> paths() const override;

  uint64_t samples_in_cpython() const { return samples_; }

 private:
  uint64_t samples_ = 0;
};

// Whether entry code `fn` is one of CPython's allocator domains' (the preload library's wrappers).
bool in_cpython_allocator(uint16_t fn);

}  // namespace allocscope
