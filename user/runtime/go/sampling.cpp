#include "runtime/go/sampling.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <iterator>
#include <set>

#include "probe/placement/code_reading.h"
#include "runtime/go/pclntab.h"

namespace allocscope {

std::optional<GoProfileLayout> go_profile_layout(std::string_view version) {
  int major = 0, minor = 0;
  if (!version.starts_with("go")) return std::nullopt;
  const char *p = version.data() + 2, *end = version.data() + version.size();
  auto r = std::from_chars(p, end, major);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '.') return std::nullopt;
  if (std::from_chars(r.ptr + 1, end, minor).ec != std::errc() || major != 1) return std::nullopt;
  // Read in Go's sources: mProf_Malloc gained mp in 1.23, which also made
  // the profile record kind 3 (weak handles took 2); 1.24 widened
  // special.offset from uint16 to uintptr; 1.25 gave a tiny block's special
  // kind 1, and the profile record is 4 (1.25 read in trixie-backports'
  // golang-1.25-src, 1.26 and 1.27 in sid's).
  if (minor < 18 || minor > 27) return std::nullopt;
  return GoProfileLayout{.mp_first = minor >= 23,
                         .kind = uint8_t(minor >= 25   ? 4
                                         : minor >= 23 ? 3
                                                       : 2),
                         .kind_offset = uint8_t(minor >= 24 ? 16 : 10)};
}

namespace {

// The displacement of operand i when it is the 8 bytes at [rax + disp].
std::optional<int64_t> rax_field(const cs_x86& x, int i) {
  if (x.op_count <= i || x.operands[i].type != X86_OP_MEM || x.operands[i].size != 8) return std::nullopt;
  const x86_op_mem& m = x.operands[i].mem;
  if (m.base != X86_REG_RAX || m.index != X86_REG_INVALID || m.disp <= 0) return std::nullopt;
  return m.disp;
}

x86_reg reg_of(const cs_x86& x, int i) {
  return x.op_count > i && x.operands[i].type == X86_OP_REG ? x.operands[i].reg : X86_REG_INVALID;
}

}  // namespace

std::optional<uint64_t> go_rate_switch(std::span<const uint8_t> code, uint64_t address, uint64_t rate) {
  constexpr int kMostBetween = 4;  // instructions between the switch's read and the rate's write
  std::optional<uint64_t> found, byte_read;
  int since = 0;
  disassemble(code, address, [&](const cs_insn& insn) {
    const cs_x86& x = insn.detail->x86;
    std::optional<uint64_t> target;
    uint8_t size = 0;
    for (uint8_t i = 0; i < x.op_count; ++i)
      if (x.operands[i].type == X86_OP_MEM && x.operands[i].mem.base == X86_REG_RIP) {
        target = insn.address + insn.size + uint64_t(x.operands[i].mem.disp);
        size = x.operands[i].size;
      }
    if (target == rate && size == 8 && byte_read && since <= kMostBetween) {
      found = byte_read;
      return false;
    }
    if (target && size == 1) {
      byte_read = target;
      since = 0;
    } else {
      ++since;
    }
    return true;
  });
  return found;
}

std::optional<uint64_t> go_profstack_offset(std::span<const uint8_t> code, uint64_t address) {
  std::optional<uint64_t> found;
  x86_reg loaded = X86_REG_INVALID;  // the register last loaded from [rax + disp], and that disp
  int64_t disp = 0;
  std::optional<int64_t> tested;  // the field a test or a compare with 0 read
  int n = 0;
  disassemble(code, address, [&](const cs_insn& insn) {
    const cs_x86& x = insn.detail->x86;
    if (insn.id == X86_INS_NOP) return true;
    if (tested) {  // the next instruction branches on it, or this is not the check
      if (insn.id == X86_INS_JE) found = uint64_t(*tested);
      return false;
    }
    std::optional<int64_t> field = rax_field(x, 1);
    bool writes_rax = reg_of(x, 0) == X86_REG_RAX && insn.id != X86_INS_CMP && insn.id != X86_INS_TEST;
    if (insn.id == X86_INS_MOV && field && reg_of(x, 0) != X86_REG_INVALID && !writes_rax) {
      loaded = reg_of(x, 0);  // mov r, [rax + disp]; test r, r
      disp = *field;
    } else if (insn.id == X86_INS_TEST && loaded != X86_REG_INVALID && reg_of(x, 0) == loaded &&
               reg_of(x, 1) == loaded) {
      tested = disp;
    } else if (insn.id == X86_INS_CMP && rax_field(x, 0) && x.op_count == 2 &&
               x.operands[1].type == X86_OP_IMM && x.operands[1].imm == 0) {
      tested = rax_field(x, 0);  // cmp qword ptr [rax + disp], 0
    } else if (writes_rax || insn.id == X86_INS_CALL || insn.id == X86_INS_RET) {
      return false;  // mp is gone, or the function went on without the check
    }
    return ++n < 16;
  });
  return found;
}

namespace {

std::optional<uint64_t> symbol(const std::vector<ElfSymbol>& symbols, std::string_view name) {
  auto it = std::find_if(symbols.begin(), symbols.end(), [&](const ElfSymbol& s) { return s.name == name; });
  return it == symbols.end() ? std::nullopt : std::optional<uint64_t>(it->vaddr);
}

// The first `most` bytes of a function's code, and its address.
std::optional<std::pair<std::vector<uint8_t>, uint64_t>> function_code(const ElfFile& elf,
                                                                       const GoPclntab& table,
                                                                       std::string_view function,
                                                                       uint64_t most) {
  auto range = table.range(function);
  if (!range) return std::nullopt;
  auto off = elf.vaddr_to_offset(range->first);
  if (!off) return std::nullopt;
  auto code = elf.read(*off, std::min(range->second - range->first, most));
  if (!code) return std::nullopt;
  return std::pair{std::move(*code), range->first};
}

std::set<uint64_t> targets_of(const ElfFile& elf, const GoPclntab& table, std::string_view function) {
  auto range = table.range(function);
  if (!range || range->second - range->first > (1u << 20)) return {};
  auto code = function_code(elf, table, function, 1u << 20);
  if (!code) return {};
  std::vector<uint64_t> found = rip_targets(code->first, code->second);
  return {found.begin(), found.end()};
}

std::optional<uint64_t> profstack_offset(const ElfFile& elf, const GoPclntab& table) {
  auto code = function_code(elf, table, "runtime.mProf_Malloc", 256);
  return code ? go_profstack_offset(code->first, code->second) : std::nullopt;
}

// Stripped: the one variable both the sampler's reset (profilealloc) and a
// new mcache's first countdown (allocmcache) read, checked in Go 1.19 (where
// it lies in .bss, set by the runtime's init) and 1.24 (in .data).
Result<uint64_t> memprofilerate(const ElfFile& elf, const GoPclntab& table) {
  std::set<uint64_t> a = targets_of(elf, table, "runtime.profilealloc"),
                     b = targets_of(elf, table, "runtime.allocmcache"), both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(both, both.end()));
  if (both.size() != 1)
    return fail("runtime.MemProfileRate was not found (a stripped program of a new layout)");
  return *both.begin();
}

// By symbol, or stripped, where the runtime's start reads it.
uint64_t linked_out_switch(const ElfFile& elf, const GoPclntab& table, uint64_t rate) {
  if (auto sym = symbol(elf.objects(), "runtime.disableMemoryProfiling")) return *sym;
  for (std::string_view function : {"runtime.schedinit", "runtime.init"}) {
    auto range = table.range(function);
    if (!range) continue;
    auto code =
        function_code(elf, table, function, std::min<uint64_t>(range->second - range->first, 1u << 16));
    if (!code) continue;
    if (auto found = go_rate_switch(code->first, code->second, rate)) return *found;
  }
  return 0;
}

}  // namespace

Result<GoRuntimeSampling> go_runtime_sampling(const ElfFile& elf, const GoPclntab& table,
                                              std::string_view version,
                                              const std::vector<ElfSymbol>& functions) {
  auto layout = go_profile_layout(version);
  if (!layout)
    return fail(std::string(version.empty() ? "its Go release" : version) +
                "'s runtime records are not read by allocscope (Go 1.18 to 1.27 are)");
  GoRuntimeSampling s{.layout = *layout};
  // The linker sets runtime.disableMemoryProfiling, and the runtime's rate to
  // 0, when nothing can read the profile (MemProfile before 1.23,
  // memProfileInternal since): no runtime/pprof in the program. Its
  // sampling is all there, idle.
  s.linked_out = !table.entry("runtime.MemProfile") && !table.entry("runtime.memProfileInternal");
  auto find = [&](std::string_view name) {
    auto v = symbol(functions, name);
    return v ? v : table.entry(name);
  };
  auto mprof = find("runtime.mProf_Malloc"), free = find("runtime.freeSpecial");
  auto mallocgc = table.range("runtime.mallocgc");
  if (!mprof || !free || !mallocgc)
    return fail(std::string("runtime.") +
                (!mprof  ? "mProf_Malloc"
                 : !free ? "freeSpecial"
                         : "mallocgc") +
                " was not found");
  s.mprof_malloc = *mprof;
  s.free_special = *free;
  std::tie(s.mallocgc, s.mallocgc_end) = *mallocgc;
  if (layout->mp_first) {
    auto offset = profstack_offset(elf, table);
    if (!offset) return fail("runtime.mProf_Malloc's test of its m was not found (a new layout)");
    s.profstack = *offset;
  }
  if (auto rate = symbol(elf.objects(), "runtime.MemProfileRate")) {
    s.rate = *rate;
  } else {
    auto found = memprofilerate(elf, table);
    if (!found) return fail(found.error());
    s.rate = *found;
  }
  if (s.linked_out) s.linked_out_switch = linked_out_switch(elf, table, s.rate);
  return s;
}

}  // namespace allocscope
