// libFuzzer: machine code at an allocator's entry, as probe placement reads
// it (capstone): where a uprobe may go and whether the kernel emulates the
// instruction there.
#include <cstddef>
#include <cstdint>
#include <span>

#include "probe/probe_placement.h"

using namespace allocscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> code(data, size);
  (void)place_probe(code, 0x401000, false);
  (void)place_probe(code, 0x401000, true);
  (void)kernel_emulates(code.first(size < 15 ? size : 15));
  return 0;
}
