#include "probe/placement/probe_placement.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace allocscope {
namespace {

struct Handle {
  csh h = 0;
  Handle() {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK) cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  }
  ~Handle() {
    if (h) cs_close(&h);
  }
};

struct Insns {
  cs_insn* insn = nullptr;
  size_t count = 0;
  ~Insns() {
    if (insn) cs_free(insn, count);
  }
};

// The probe read away from the entry (a free's, mallocgc's) reads only its
// first argument register: a probe placed after an instruction that writes
// it would read a changed argument. Scratch registers, the stack and memory
// may change before it.
bool writes_argument(csh h, const cs_insn& insn, ProbedArgument argument) {
  cs_regs read, written;
  uint8_t nread = 0, nwritten = 0;
  if (cs_regs_access(h, &insn, read, &nread, written, &nwritten) != CS_ERR_OK) return true;
  static const x86_reg rdi[] = {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL};
  static const x86_reg go[] = {X86_REG_RAX, X86_REG_EAX, X86_REG_AX,  X86_REG_AL,  X86_REG_RBX, X86_REG_EBX,
                               X86_REG_BX,  X86_REG_BL,  X86_REG_RCX, X86_REG_ECX, X86_REG_CX,  X86_REG_CL};
  std::span<const x86_reg> names = argument == ProbedArgument::GoFirst ? std::span<const x86_reg>(go) : rdi;
  for (uint8_t i = 0; i < nwritten; ++i)
    if (std::find(names.begin(), names.end(), written[i]) != names.end()) return true;
  return false;
}

bool is_conditional_jump(csh h, const cs_insn& insn) {
  return cs_insn_group(h, &insn, CS_GRP_JUMP) && insn.id != X86_INS_JMP && insn.detail->x86.op_count == 1 &&
         insn.detail->x86.operands[0].type == X86_OP_IMM;
}

// Whether the code at `target` returns within a few instructions without
// calling or jumping anywhere: an early exit that does no work (free(NULL)).
bool returns_at_once(csh h, std::span<const uint8_t> code, uint64_t address, uint64_t target) {
  if (target < address || target >= address + code.size()) return false;
  Insns d;
  d.count =
      cs_disasm(h, code.data() + (target - address), code.size() - (target - address), target, 4, &d.insn);
  for (size_t i = 0; i < d.count; ++i) {
    if (d.insn[i].id == X86_INS_RET) return true;
    if (cs_insn_group(h, &d.insn[i], CS_GRP_JUMP) || cs_insn_group(h, &d.insn[i], CS_GRP_CALL)) return false;
  }
  return false;
}

}  // namespace

bool kernel_emulates(std::span<const uint8_t> b, const Emulation& emulation) {
  if (b.empty()) return false;
  // Relative branches and calls, without prefixes (branch_setup_xol_ops):
  // jmp rel8/rel32, call rel32, jcc rel8 (70-7f) and rel32 (0f 80-8f).
  if ((b.size() == 2 && (b[0] == 0xeb || (b[0] >= 0x70 && b[0] <= 0x7f))) ||
      (b.size() == 5 && (b[0] == 0xe9 || b[0] == 0xe8)) ||
      (b.size() == 6 && b[0] == 0x0f && b[1] >= 0x80 && b[1] <= 0x8f))
    return true;
  // push %reg: 50+r, or 41 50+r for r8-r15 (x86 uprobes: push_setup_xol_ops).
  if (emulation.push && b.size() == 1 && b[0] >= 0x50 && b[0] <= 0x57) return true;
  if (emulation.push && b.size() == 2 && b[0] == 0x41 && b[1] >= 0x50 && b[1] <= 0x57) return true;
  // nop, and the multi-byte 0f 1f nops (emulated after Linux 6.12).
  if (!emulation.nops) return false;
  if (b.size() == 1 && b[0] == 0x90) return true;
  size_t i = 0;
  while (i < b.size() && (b[i] == 0x66 || b[i] == 0x2e)) ++i;
  return b.size() - i >= 2 && b[i] == 0x0f && b[i + 1] == 0x1f;
}

Placement place_probe(std::span<const uint8_t> code, uint64_t address, bool entry_only,
                      const Emulation& emulation, ProbedArgument argument) {
  Handle h;
  Insns d;
  if (h.h) d.count = cs_disasm(h.h, code.data(), code.size(), address, 24, &d.insn);
  Placement entry{0, false, ""};
  if (d.count == 0) return entry;
  auto describe = [](const cs_insn& insn) { return std::string(insn.mnemonic) + " " + insn.op_str; };
  entry.emulated = kernel_emulates({d.insn[0].bytes, d.insn[0].size}, emulation);
  entry.instruction = describe(d.insn[0]);
  if (entry.emulated || entry_only) return entry;
  // Walk forward over instructions that keep the pointer argument, and over
  // branches that only leave for an immediate return (free(NULL) costs no
  // trap), to the first emulated instruction: a push, a nop, or a branch
  // every call goes through. Failing that, the first such early-exit branch
  // itself, if the kernel emulates it (mimalloc's free overwrites the
  // pointer right after its NULL check).
  std::optional<Placement> exit_branch;
  for (size_t i = 0; i < d.count; ++i) {
    const cs_insn& insn = d.insn[i];
    bool emulated = kernel_emulates({insn.bytes, insn.size}, emulation);
    if (is_conditional_jump(h.h, insn) &&
        returns_at_once(h.h, code, address, uint64_t(insn.detail->x86.operands[0].imm))) {
      if (emulated && !exit_branch) exit_branch = Placement{insn.address - address, true, describe(insn)};
      continue;
    }
    if (emulated) return {insn.address - address, true, describe(insn)};
    if (cs_insn_group(h.h, &insn, CS_GRP_JUMP) || cs_insn_group(h.h, &insn, CS_GRP_CALL) ||
        cs_insn_group(h.h, &insn, CS_GRP_RET) || writes_argument(h.h, insn, argument))
      break;
  }
  return exit_branch.value_or(entry);
}

}  // namespace allocscope
