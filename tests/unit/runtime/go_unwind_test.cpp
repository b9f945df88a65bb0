// A Go program's frames unwound by Go's own table (its pclntab's stack-
// pointer runs), which strip keeps: each run against the .debug_frame Go's
// linker writes for an unstripped build, and the rows the kernel gets for
// Debian's stripped gofmt.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "go_programs.h"
#include "runtime/go/pclntab.h"
#include "runtime/registry.h"
#include "symbols/elf_file.h"
#include "symbols/unwind_table.h"
#include "temp_dir.h"

namespace allocscope {
namespace {

constexpr const char* kGofmt = "/usr/lib/go/bin/gofmt";  // static, stripped

// The CFA's offset from rsp at `pc` by the .debug_frame, nullopt when
// another rule (or none) covers it.
std::optional<int64_t> debug_frame_cfa(Dwarf_CFI* cfi, uint64_t pc) {
  Dwarf_Frame* frame = nullptr;
  if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) return std::nullopt;
  std::unique_ptr<Dwarf_Frame, decltype(&std::free)> owned(frame, &std::free);
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(frame, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_bregx || ops[0].number != 7)
    return std::nullopt;
  return int64_t(ops[0].number2);
}

// Each run's CFA against the .debug_frame of an unstripped build by `go`.
void expect_runs_as_debug_frame(const std::string& go) {
  TempDir dir("allocscope-go-unwind");
  std::string binary = build_go_program(
      dir, "frames", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"frames\") }\n", "", go);
  auto elf = ElfFile::open(binary);
  ASSERT_TRUE(elf) << elf.error().message;
  auto table = go_pclntab(*elf);
  ASSERT_TRUE(table) << table.error().message;
  std::unique_ptr<Dwarf, decltype(&dwarf_end)> dw(dwarf_begin_elf(elf->elf(), DWARF_C_READ, nullptr),
                                                  &dwarf_end);
  ASSERT_TRUE(dw);
  Dwarf_CFI* cfi = dwarf_getcfi(dw.get());
  ASSERT_TRUE(cfi);
  size_t compared = 0, differ = 0;
  for (const GoSpRun& run : table->sp_runs()) {
    if (run.flag & kGoSpWrite) continue;
    auto cfa = debug_frame_cfa(cfi, run.start);
    if (!cfa) continue;
    ++compared;
    if (*cfa != int64_t(run.sp) + 8 && ++differ <= 5)
      ADD_FAILURE() << std::hex << "0x" << run.start << ": sp " << std::dec << run.sp
                    << ", .debug_frame's CFA rsp+" << *cfa;
  }
  EXPECT_GT(compared, 5000u);
  EXPECT_EQ(differ, 0u);
}

TEST(GoUnwind, TheStackPointerRunsAgreeWithGosDebugFrame) {
  for (const std::string& go : go_toolchains()) {
    SCOPED_TRACE(go);
    expect_runs_as_debug_frame(go);
  }
}

TEST(GoUnwind, AStrippedProgramsRowsComeFromItsFunctionTable) {
  auto elf = ElfFile::open(kGofmt);
  ASSERT_TRUE(elf);
  auto table = go_pclntab(*elf);
  ASSERT_TRUE(table);
  auto rows = build_unwind_table(*elf, runtime_tables_readers());
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(rows->source, UnwindTable::Source::Runtime);
  EXPECT_STREQ(source_name(*rows), "Go's pclntab");
  EXPECT_GT(rows->runtime_runs, 10000u);
  auto row_at = [&](const char* function, uint64_t past_entry) {
    auto entry = table->entry(function);
    EXPECT_TRUE(entry) << function;
    auto off = entry ? elf->vaddr_to_offset(*entry + past_entry) : Result<uint64_t>(fail("none"));
    const as_unwind_row* r = off ? find_row(rows->rows, *off) : nullptr;
    return r ? *r : as_unwind_row{0, 0, 0xff, 0};
  };
  // At the entry the return address is on top; the caller's rbp untouched.
  as_unwind_row entry = row_at("runtime.mallocgc", 0);
  EXPECT_EQ(entry.kind, AS_CFA_RSP);
  EXPECT_EQ(entry.cfa_off, 1);
  EXPECT_EQ(entry.rbp, 0);
  // Inside, the frame made: the caller's rbp saved under the return address.
  bool framed = false;
  for (const GoSpRun& run : table->sp_runs())
    if (run.start > *table->entry("runtime.mallocgc") && run.sp > 0 && !framed) {
      as_unwind_row inside = row_at("runtime.mallocgc", run.start - *table->entry("runtime.mallocgc"));
      EXPECT_EQ(inside.kind, AS_CFA_RSP);
      EXPECT_EQ(inside.cfa_off, (run.sp + 8) / 8);
      EXPECT_EQ(inside.rbp, -2);
      framed = true;
    }
  EXPECT_TRUE(framed);
  EXPECT_EQ(row_at("runtime.goexit", 1).kind, AS_ROW_END);        // a goroutine's first frame
  EXPECT_EQ(row_at("runtime.systemstack", 8).kind, AS_ROW_NONE);  // it switches stacks
}

}  // namespace
}  // namespace allocscope
