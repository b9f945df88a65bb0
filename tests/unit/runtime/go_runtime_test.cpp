// Go's own heap sampling found in Go programs: each release's layout, the
// runtime's functions and MemProfileRate by symbol and, stripped or PIE,
// without; the choice between it and mallocgc's calls; the frames a
// deferred walk still leaves out.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "go_programs.h"
#include "probe/placement/allocator_entries.h"
#include "probe/placement/allocator_probes.h"
#include "probe/placement/code_reading.h"
#include "runtime/go/heap_route.h"
#include "runtime/go/pclntab.h"
#include "runtime/go/sampling.h"
#include "runtime/go/sized.h"
#include "runtime/registry.h"
#include "symbols/stack_walk.h"

namespace allocscope {
namespace {

TEST(GoProfileLayout, EachReleaseAsItsSourcesHaveIt) {
  for (const char* v : {"go1.18", "go1.19.8", "go1.22.12"}) {
    auto l = go_profile_layout(v);
    ASSERT_TRUE(l) << v;
    EXPECT_FALSE(l->mp_first) << v;
    EXPECT_EQ(l->kind, 2) << v;
    EXPECT_EQ(l->kind_offset, 10) << v;
  }
  auto l23 = go_profile_layout("go1.23.4"), l24 = go_profile_layout("go1.24.4");
  ASSERT_TRUE(l23 && l24);
  EXPECT_TRUE(l23->mp_first && l24->mp_first);
  EXPECT_EQ(l23->kind, 3);
  EXPECT_EQ(l24->kind, 3);
  EXPECT_EQ(l23->kind_offset, 10);
  EXPECT_EQ(l24->kind_offset, 16);                                // special.offset became a uintptr
  for (const char* v : {"go1.25.12", "go1.26.10", "go1.27.3"}) {  // a tiny block's special took kind 1
    auto l = go_profile_layout(v);
    ASSERT_TRUE(l) << v;
    EXPECT_TRUE(l->mp_first) << v;
    EXPECT_EQ(l->kind, 4) << v;
    EXPECT_EQ(l->kind_offset, 16) << v;
  }
  for (const char* v : {"", "go1.17.13", "go1.28.1", "go2.0", "devel go1.24", "go1.x"})
    EXPECT_FALSE(go_profile_layout(v)) << v;
}

TEST(RipTargets, AddressesRelativeToTheNextInstruction) {
  // mov rax, [rip+0x10]; nop; lea rcx, [rip-0x20]; mov [rax], rbx
  const uint8_t code[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, 0x90, 0x48,
                          0x8d, 0x0d, 0xe0, 0xff, 0xff, 0xff, 0x48, 0x89, 0x18};
  EXPECT_EQ(rip_targets(code, 0x1000), (std::vector<uint64_t>{0x1017, 0x1000 + 15 - 0x20}));
}

TEST(GoProfstackOffset, TheFieldMProfMallocTestsFirst) {
  // sub rsp, 0x70; mov rsi, [rax+0x2b0]; nop; test rsi, rsi; je +0x160
  const uint8_t code[] = {0x48, 0x83, 0xec, 0x70, 0x48, 0x8b, 0xb0, 0xb0, 0x02, 0x00, 0x00,
                          0x90, 0x48, 0x85, 0xf6, 0x0f, 0x84, 0x60, 0x01, 0x00, 0x00};
  EXPECT_EQ(go_profstack_offset(code, 0x1000), 0x2b0u);
  // The same load, another register tested: not the check.
  const uint8_t other[] = {0x48, 0x8b, 0xb0, 0xb0, 0x02, 0x00, 0x00, 0x48,
                           0x85, 0xd2, 0x0f, 0x84, 0x60, 0x01, 0x00, 0x00};
  EXPECT_FALSE(go_profstack_offset(other, 0x1000));
  // The same test as a compare with 0.
  const uint8_t compared[] = {0x48, 0x83, 0xb8, 0xb0, 0x02, 0x00, 0x00,
                              0x00, 0x0f, 0x84, 0x60, 0x01, 0x00, 0x00};
  EXPECT_EQ(go_profstack_offset(compared, 0x1000), 0x2b0u);
  // mp (rax) replaced before the load: another object's field.
  const uint8_t replaced[] = {0x48, 0x89, 0xd8, 0x48, 0x8b, 0xb0, 0xb0, 0x02, 0x00, 0x00,
                              0x48, 0x85, 0xf6, 0x0f, 0x84, 0x60, 0x01, 0x00, 0x00};
  EXPECT_FALSE(go_profstack_offset(replaced, 0x1000));
  // Tested, then no branch on it.
  const uint8_t no_je[] = {0x48, 0x8b, 0xb0, 0xb0, 0x02, 0x00, 0x00, 0x48, 0x85, 0xf6, 0xc3};
  EXPECT_FALSE(go_profstack_offset(no_je, 0x1000));
}

// The offset of runtime.m's field `name` by the DWARF Go's linker writes.
std::optional<uint64_t> dwarf_member_offset(const ElfFile& elf, const char* type, const char* name) {
  std::unique_ptr<Dwarf, decltype(&dwarf_end)> dw(dwarf_begin_elf(elf.elf(), DWARF_C_READ, nullptr),
                                                  &dwarf_end);
  if (!dw) return std::nullopt;
  Dwarf_Off off = 0, next = 0;
  size_t header = 0;
  while (dwarf_nextcu(dw.get(), off, &next, &header, nullptr, nullptr, nullptr) == 0) {
    Dwarf_Die cu, die, member;
    if (dwarf_offdie(dw.get(), off + header, &cu) && dwarf_child(&cu, &die) == 0) do {
        const char* n = dwarf_diename(&die);
        if (dwarf_tag(&die) != DW_TAG_structure_type || !n || std::string(n) != type) continue;
        if (dwarf_child(&die, &member) == 0) do {
            const char* m = dwarf_diename(&member);
            Dwarf_Attribute a;
            Dwarf_Word at = 0;
            if (m && std::string(m) == name && dwarf_attr(&member, DW_AT_data_member_location, &a) &&
                dwarf_formudata(&a, &at) == 0)
              return at;
          } while (dwarf_siblingof(&member, &member) == 0);
      } while (dwarf_siblingof(&die, &die) == 0);
    off = next;
  }
  return std::nullopt;
}

std::string workload_source(const char* name) {
  std::ifstream in(std::string(WORKLOADS_DIR) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The same program built as Go builds it, stripped, and as a stripped PIE:
// the same functions, and MemProfileRate found without symbols where the
// symbol table has it.
TEST(GoRuntimeSampling, FoundByTheFunctionTableAsByTheSymbols) {
  TempDir dir;
  std::string source = workload_source("go_heap.go");
  for (const std::string& go : go_toolchains()) {
    SCOPED_TRACE(go);
    std::string plain = build_go_program(dir, "plain", source, "", go);
    auto elf = ElfFile::open(plain);
    ASSERT_TRUE(elf);
    auto table = go_pclntab(*elf);
    ASSERT_TRUE(table) << table.error().message;
    std::vector<ElfSymbol> functions = elf->functions(), objects = elf->objects();
    auto rate = std::find_if(objects.begin(), objects.end(),
                             [](const ElfSymbol& s) { return s.name == "runtime.MemProfileRate"; });
    ASSERT_NE(rate, objects.end());
    auto by_symbols = go_runtime_sampling(*elf, *table, go == "go" ? "go1.19.8" : "go1.24.4", functions);
    ASSERT_TRUE(by_symbols) << by_symbols.error().message;
    EXPECT_EQ(by_symbols->rate, rate->vaddr);
    EXPECT_EQ(by_symbols->mprof_malloc, *table->entry("runtime.mProf_Malloc"));
    EXPECT_EQ(by_symbols->free_special, *table->entry("runtime.freeSpecial"));
    EXPECT_EQ(by_symbols->mallocgc, *table->entry("runtime.mallocgc"));
    EXPECT_GT(by_symbols->mallocgc_end, by_symbols->mallocgc + 64);
    // Go 1.24 drops a sample while m.profStack is nil; 1.19 has no such field.
    EXPECT_EQ(by_symbols->profstack,
              go == "go" ? 0 : dwarf_member_offset(*elf, "runtime.m", "profStack").value_or(1));
    // The same file read without its symbols: the code finds the variable.
    auto without = go_runtime_sampling(*elf, *table, go == "go" ? "go1.19.8" : "go1.24.4", {});
    ASSERT_TRUE(without) << without.error().message;
    EXPECT_EQ(without->rate, rate->vaddr);
    for (const char* flags : {"-ldflags=-s\\ -w", "-buildmode=pie -ldflags=-s\\ -w"}) {
      SCOPED_TRACE(flags);
      auto targets = find_allocator_probes(build_go_program(dir, "stripped", source, flags, go), false, "",
                                           {}, runtime_entry_finders());
      ASSERT_TRUE(targets) << targets.error().message;
      std::vector<uint16_t> kinds;
      for (const ProbeTarget& t : *targets) kinds.push_back(as_fn_kind(t.fn));
      EXPECT_EQ(kinds, (std::vector<uint16_t>{AS_FN_GO_MALLOC, AS_FN_GO_FREE, AS_FN_GO_PROFILE}));
      for (const ProbeTarget& t : *targets) {
        EXPECT_TRUE(t.at_stack_check) << as_fn_name(t.fn) << ": " << t.instruction;  // on the jbe
        if (t.go_profile) {
          EXPECT_EQ(t.go_profile->probe, t.vaddr + t.placed_at);
        }
      }
      EXPECT_EQ((*targets)[2].go_profile->args, go == "go" ? 0u : 1u);
      EXPECT_EQ((*targets)[2].go_profile->profstack, by_symbols->profstack);
      EXPECT_EQ((*targets)[1].go_cookie >> AS_COOKIE_GO_SHIFT,
                go == "go" ? (2u | 10u << 8) : (3u | 16u << 8));
    }
  }
}

TEST(GoRateSwitch, TheByteReadJustBeforeTheRateIsWritten) {
  // Go 1.24's schedinit: cmp byte [rip+0x10], 0; je +0xb; mov qword [rip+0x20], 0
  const uint8_t v124[] = {0x80, 0x3d, 0x10, 0x00, 0x00, 0x00, 0x00, 0x74, 0x0b, 0x48,
                          0xc7, 0x05, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(go_rate_switch(v124, 0x1000, 0x1000 + 20 + 0x20), 0x1000u + 7 + 0x10);
  EXPECT_FALSE(go_rate_switch(v124, 0x1000, 0x1000 + 20 + 0x28));  // another variable written
  // Go 1.19's runtime.init: movzx eax, byte [rip+0x10]; test rax, rax; mov eax, 0x80000;
  // mov ecx, 0; cmovne rax, rcx; mov [rip+0x20], rax
  const uint8_t v119[] = {0x0f, 0xb6, 0x05, 0x10, 0x00, 0x00, 0x00, 0x48, 0x85, 0xc0, 0xb8,
                          0x00, 0x00, 0x08, 0x00, 0xb9, 0x00, 0x00, 0x00, 0x00, 0x48, 0x0f,
                          0x45, 0xc1, 0x48, 0x89, 0x05, 0x20, 0x00, 0x00, 0x00};
  EXPECT_EQ(go_rate_switch(v119, 0x1000, 0x1000 + 31 + 0x20), 0x1000u + 7 + 0x10);
  // A byte read too long before the write: not its switch.
  std::vector<uint8_t> far(v119, v119 + 7);
  for (int i = 0; i < 5; ++i) far.push_back(0x90);
  far.insert(far.end(), v119 + 24, v119 + 31);
  EXPECT_FALSE(go_rate_switch(far, 0x1000, 0x1000 + far.size() + 0x20));
}

// Where the runtime's start reads the linker's switch, in each Go's build
// of a program without runtime/pprof: the code finds the symbol's variable.
TEST(GoRuntimeSampling, TheLinkedOutSwitchIsFoundByItsCode) {
  TempDir dir;
  std::string source = workload_source("go_sites.go");
  for (const std::string& go : go_toolchains()) {
    SCOPED_TRACE(go);
    auto elf = ElfFile::open(build_go_program(dir, "sites", source, "", go));
    ASSERT_TRUE(elf);
    auto table = go_pclntab(*elf);
    ASSERT_TRUE(table) << table.error().message;
    std::vector<ElfSymbol> objects = elf->objects();
    auto named = [&](std::string_view name) {
      auto it =
          std::find_if(objects.begin(), objects.end(), [&](const ElfSymbol& s) { return s.name == name; });
      return it == objects.end() ? 0 : it->vaddr;
    };
    uint64_t rate = named("runtime.MemProfileRate"), on = named("runtime.disableMemoryProfiling");
    ASSERT_NE(on, 0u);
    std::optional<uint64_t> found;
    for (const char* function : {"runtime.schedinit", "runtime.init"}) {
      auto range = table->range(function);
      if (!range || found) continue;
      auto offset = elf->vaddr_to_offset(range->first);
      if (!offset) continue;
      auto code = elf->read(*offset, range->second - range->first);
      if (code) found = go_rate_switch(*code, range->first, rate);
    }
    EXPECT_EQ(found, on);
    auto sampling = go_runtime_sampling(*elf, *table, go == "go" ? "go1.19.8" : "go1.24.4", elf->functions());
    ASSERT_TRUE(sampling) << sampling.error().message;
    EXPECT_TRUE(sampling->linked_out);
    EXPECT_EQ(sampling->linked_out_switch, on);
  }
}

// Its runtime samples nothing (MemProfileRate 0): its calls are probed,
// unless its rate may be set (a running process of -p's, a launched command's), which its idle
// sampling then serves at any rate.
TEST(GoRuntimeSampling, AProgramWithoutRuntimePprofSamplesNothingUntilItsRateIsSet) {
  TempDir dir;
  auto targets = find_allocator_probes(
      build_go_program(dir, "sites", workload_source("go_sites.go"), "-ldflags=-s\\ -w"), false, "", {},
      runtime_entry_finders());
  ASSERT_TRUE(targets) << targets.error().message;
  ASSERT_EQ(targets->size(), 3u);
  auto profile = std::find_if(targets->begin(), targets->end(),
                              [](const ProbeTarget& t) { return as_fn_kind(t.fn) == AS_FN_GO_PROFILE; });
  ASSERT_NE(profile, targets->end());
  EXPECT_TRUE(profile->go_linked_out);
  std::vector<ProbeTarget> launched = *targets;
  GoHeapChoice c = pick_go_heap(launched, kGoMemProfileRate, false, false);
  EXPECT_EQ(c.route, GoHeapRoute::Calls);
  EXPECT_NE(c.why_calls.find("memory profiling linked out"), std::string::npos) << c.why_calls;
  ASSERT_EQ(launched.size(), 1u);
  EXPECT_EQ(as_fn_kind(launched.front().fn), AS_FN_GO_MALLOC);
  std::vector<ProbeTarget> attached = *targets;
  c = pick_go_heap(attached, 64 * 1024, false, false, true);
  EXPECT_EQ(c.route, GoHeapRoute::Runtime);
  EXPECT_TRUE(c.sets_rate);
  EXPECT_EQ(attached.size(), 2u);  // its sampling and its frees
  std::vector<ProbeTarget> exact = *targets;
  EXPECT_EQ(pick_go_heap(exact, 1, false, false, true).route, GoHeapRoute::Calls);
}

std::vector<ProbeTarget> three_targets(const std::string& why_not = "") {
  std::vector<ProbeTarget> t = {{.fn = AS_FN_MALLOC, .vaddr = 1},
                                {.fn = AS_FN_GO_MALLOC, .vaddr = 2},
                                {.fn = AS_FN_GO_PROFILE, .vaddr = 3},
                                {.fn = AS_FN_GO_FREE, .vaddr = 4}};
  t[1].go_no_profile = why_not;
  if (!why_not.empty()) t.resize(2);
  return t;
}

std::vector<uint64_t> vaddrs(const std::vector<ProbeTarget>& targets) {
  std::vector<uint64_t> out;
  for (const ProbeTarget& t : targets) out.push_back(t.vaddr);
  return out;
}

TEST(PickGoHeap, TheRuntimesSamplingWhereItServesElseMallocgcsCalls) {
  auto t = three_targets();
  GoHeapChoice c = pick_go_heap(t, kGoMemProfileRate, false, false);
  EXPECT_EQ(c.route, GoHeapRoute::Runtime);
  EXPECT_EQ(vaddrs(t), (std::vector<uint64_t>{1, 3, 4}));
  struct Case {
    uint64_t rate;
    bool calls;
    std::string why_not, said;
  };
  for (const Case& k : {Case{64 * 1024, false, "", "--rate is not"}, Case{1, false, "", "exact mode"},
                        Case{kGoMemProfileRate, true, "", "--go-heap-calls"},
                        Case{kGoMemProfileRate, false, "linked out", "linked out"}}) {
    t = three_targets(k.why_not);
    c = pick_go_heap(t, k.rate, k.calls, false);
    EXPECT_EQ(c.route, GoHeapRoute::Calls) << k.said;
    EXPECT_NE(c.why_calls.find(k.said), std::string::npos) << c.why_calls;
    EXPECT_EQ(vaddrs(t), (std::vector<uint64_t>{1, 2})) << k.said;
  }
  t = three_targets();
  EXPECT_EQ(pick_go_heap(t, kGoMemProfileRate, false, true).route, GoHeapRoute::None);
  EXPECT_EQ(vaddrs(t), (std::vector<uint64_t>{1}));
  std::vector<ProbeTarget> c_only = {{.fn = AS_FN_MALLOC, .vaddr = 1}};
  EXPECT_EQ(pick_go_heap(c_only, kGoMemProfileRate, false, false).route, GoHeapRoute::None);
  EXPECT_EQ(c_only.size(), 1u);
}

// Go 1.27's allocators specialized by size, by their names as its
// runtime's generated code has them.
TEST(GoSizedAllocators, TheirNamesAndTheirSlowPaths) {
  for (const char* f : {"runtime.mallocgcSmallNoScanSC5", "runtime.mallocgcTinySC2",
                        "runtime.mallocgcSmallScanNoHeaderSC7", "runtime.mallocgcSmallNoScanSC12"})
    EXPECT_TRUE(is_go_sized_allocator(f)) << f;
  for (const char* f :
       {"runtime.mallocgc", "runtime.mallocgcSC", "runtime.mallocgcSC5", "runtime.mallocgcSmallNoScanSC5x",
        "runtime.mallocgcSmallNoscan", "main.mallocgcTinySC2", "runtime.mallocgcSmallNoScanSlowPath"})
    EXPECT_FALSE(is_go_sized_allocator(f)) << f;
  EXPECT_TRUE(is_go_sized_slow_path("runtime.mallocgcSmallScanSlowPath"));
  EXPECT_TRUE(is_go_sized_slow_path("runtime.mallocgcTinySlowPath"));
  EXPECT_FALSE(is_go_sized_slow_path("runtime.mallocgcSlowPath"));
  EXPECT_FALSE(is_go_sized_slow_path("runtime.mallocgcLarge"));
}

// What the probe of such an allocator is told, read back as go_malloc's
// called_by_mallocgc reads it: mallocgc before the probe and after it.
TEST(GoCountedInBits, TheProbeFindsMallocgcFromItsOwnAddress) {
  for (auto [probe, start] : {std::pair<uint64_t, uint64_t>{0x41f600, 0x47bbc0}, {0x47f000, 0x41d340}}) {
    auto bits = go_counted_in_bits(probe, {start, start + 461});
    ASSERT_TRUE(bits) << bits.error();
    ProbeTarget t{.fn = AS_FN_GO_MALLOC, .go_cookie = *bits};
    uint64_t cookie = t.cookie();
    EXPECT_TRUE(cookie & AS_COOKIE_GO_SIZED);
    EXPECT_EQ(cookie & 0xffff, uint64_t(AS_FN_GO_MALLOC));
    EXPECT_EQ(probe + uint64_t(int64_t(cookie) >> AS_COOKIE_GO_SHIFT), start);
    EXPECT_EQ((cookie >> AS_COOKIE_GO_SIZED_LEN_SHIFT) & 0xffff, 461u);
  }
  EXPECT_FALSE(go_counted_in_bits(0x400000, {0x400000 + (8u << 20), 0x400000 + (8u << 20) + 10}));
  EXPECT_FALSE(go_counted_in_bits(0x400000, {0x500000, 0x500000 + 0x10000}));
}

TEST(LeaveOutOwnFrames, ACountOrUpToTheFramesInRange) {
  std::vector<uint64_t> ips = {10, 20, 30, 40};
  as_deferred_walk skip2{};
  skip2.skip = 2;
  EXPECT_TRUE(leave_out_own_frames(ips, 1, skip2));
  EXPECT_EQ(ips, (std::vector<uint64_t>{10, 40}));
  as_deferred_walk w{};
  w.until = 300;
  w.until_end = 400;
  ips = {100, 201, 301, 401, 501};  // calls at 200, 300, ...: mallocgc is [300, 400)
  EXPECT_TRUE(leave_out_own_frames(ips, 0, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{401, 501}));
  ips = {300, 350, 501};  // frame 0's pc is the probe's, not a return address: in range, not the call
  EXPECT_TRUE(leave_out_own_frames(ips, 0, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{501}));
  ips = {7, 100, 201, 301};  // the walk stopped at its 8th frame (steps 7) and still finds it
  w.steps = 7;
  EXPECT_FALSE(leave_out_own_frames(ips, 1, w));  // 201 would be the 9th: past the bound
  EXPECT_EQ(ips, (std::vector<uint64_t>{7}));
  ips = {7, 301, 100};
  EXPECT_TRUE(leave_out_own_frames(ips, 1, w));  // the 8th frame's call is in range
  EXPECT_EQ(ips, (std::vector<uint64_t>{7, 100}));
  // Go 1.27: an allocator specialized by size ([600, 700)) called by the
  // compiler, or by mallocgc's table: every frame in either range goes.
  w = {};
  w.until = 300;
  w.until_end = 400;
  w.also = 600;
  w.also_end = 700;
  ips = {100, 201, 651, 501};  // mProf_Malloc, profilealloc, mallocgcSmallNoScanSC5, the program
  EXPECT_TRUE(leave_out_own_frames(ips, 0, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{501}));
  ips = {100, 201, 621, 651, 301, 401, 501};  // ... its slow path, the SC, mallocgc, newobject
  EXPECT_TRUE(leave_out_own_frames(ips, 0, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{401, 501}));
  ips = {5, 301, 501};  // the kernel stopped past the SC frame, mallocgc next
  w.steps = 3;
  w.own_found = 1;
  EXPECT_TRUE(leave_out_own_frames(ips, 1, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{5, 501}));
  ips = {5, 651};  // the walk ended among them: no frame of the program's
  EXPECT_TRUE(leave_out_own_frames(ips, 1, w));
  EXPECT_EQ(ips, (std::vector<uint64_t>{5}));
  w = {};
  w.skip = 5;
  ips = {1, 2, 3};
  EXPECT_TRUE(leave_out_own_frames(ips, 2, w));  // more to skip than there is
  EXPECT_EQ(ips, (std::vector<uint64_t>{1, 2}));
}

// A Go program's allocator, found by its function table (gofmt is
// stripped), probed where the kernel emulates the instruction, its size
// register (rax) untouched before it.
TEST(FindAllocatorProbes, GosMallocgcInAStrippedProgram) {
  constexpr const char* kGofmt = "/usr/lib/go/bin/gofmt";
  auto targets = find_allocator_probes(kGofmt, false, "", {}, runtime_entry_finders());
  ASSERT_TRUE(targets) << targets.error().message;
  ASSERT_EQ(targets->size(), 3u) << "mallocgc, and its runtime's idle sampling (no runtime/pprof)";
  const ProbeTarget& t = targets->front();
  EXPECT_EQ(as_fn_kind(t.fn), AS_FN_GO_MALLOC);
  auto elf = ElfFile::open(kGofmt);
  ASSERT_TRUE(elf);
  EXPECT_EQ(t.vaddr, *go_pclntab(*elf)->entry("runtime.mallocgc"));
  // Go 1.19's prologue: the stack check (cmp, not emulated), then its branch.
  EXPECT_TRUE(t.emulated) << t.instruction;
  EXPECT_TRUE(t.instruction.starts_with("jbe")) << t.instruction;
  EXPECT_EQ(t.placed_at, 4u) << t.instruction;
  EXPECT_TRUE(t.at_stack_check);  // a taken branch restarts the call: the program counts the restart
}

}  // namespace
}  // namespace allocscope
