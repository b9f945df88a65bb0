// libFuzzer: machine code at an allocator's entry, as probe placement reads
// it (capstone): where a uprobe may go and whether the kernel emulates the
// instruction there. And the same bytes as Go's tables (its pclntab and
// build information), which any program run under --all brings.
#include <cstddef>
#include <cstdint>
#include <span>

#include "probe/placement/probe_placement.h"
#include "runtime/go/build.h"
#include "runtime/go/pclntab.h"

using namespace allocscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> code(data, size);
  (void)place_probe(code, 0x401000, false);
  (void)place_probe(code, 0x401000, true);
  (void)kernel_emulates(code.first(size < 15 ? size : 15));
  (void)parse_go_buildinfo(code);
  if (auto table = GoPclntab::parse(code, 0x401000)) {
    for (uint64_t pc = 0x400ff0; pc < 0x401100; pc += 7) (void)table->at(pc);
    (void)table->entry("runtime.mallocgc");
    (void)table->sp_runs();
    table->set_func_data(code, 0x500000);  // inline trees read from the same bytes
    for (uint64_t pc = 0x400ff0; pc < 0x401100; pc += 13) (void)table->frames(pc);
  }
  return 0;
}
