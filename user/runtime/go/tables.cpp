#include "runtime/go/tables.h"

#include <utility>
#include <vector>

#include "runtime/go/pclntab.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

class GoTables : public RuntimeTables {
 public:
  explicit GoTables(GoPclntab table) : table_(std::move(table)) {}

  std::vector<SourceFrame> frames_at(uint64_t vaddr) const override {
    std::vector<SourceFrame> frames;
    for (GoPosition& p : table_.frames(vaddr))
      frames.push_back({p.function, p.function, std::move(p.file), p.line});
    return frames;
  }

  std::vector<RuntimeRun> unwind_runs() const override {
    std::vector<RuntimeRun> runs;
    for (const GoSpRun& run : table_.sp_runs()) runs.push_back({run.start, run.end, go_row(run)});
    return runs;
  }

  const char* name() const override { return "Go's pclntab"; }

 private:
  GoPclntab table_;
};

}  // namespace

// CFA = rsp + sp + 8; a function with a frame has saved the caller's rbp
// just below the return address (Go keeps frame pointers on x86-64; none is
// saved before the frame is made). Where Go's own traceback stops, so does
// the walk: at the outermost frame, and at code that moves the stack
// pointer itself.
as_unwind_row go_row(const GoSpRun& run) {
  if (run.flag & kGoTopFrame) return {0, 0, AS_ROW_END, 0};
  if ((run.flag & kGoSpWrite) || run.sp < 0 || run.sp % 8 != 0 || (int64_t(run.sp) + 8) / 8 > INT16_MAX)
    return {0, 0, AS_ROW_NONE, 0};
  return {0, int16_t((run.sp + 8) / 8), AS_CFA_RSP, int8_t(run.sp > 0 ? -2 : 0)};
}

std::unique_ptr<RuntimeTables> read_go_tables(Elf* elf) {
  // Go's linker always writes its build information (1.13 on), and strip
  // keeps it: a file without is no Go program whose table is read.
  if (!find_section(elf, ".go.buildinfo")) return nullptr;
  auto table = go_pclntab(elf);
  if (!table) return nullptr;
  return std::make_unique<GoTables>(std::move(*table));
}

}  // namespace allocscope
