#include "probe_placement.h"

#include <capstone/capstone.h>

#include <memory>
#include <vector>

namespace allocscope {
namespace {

struct Handle {
  csh h = 0;
  Handle() {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK)
      cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  }
  ~Handle() {
    if (h)
      cs_close(&h);
  }
};

struct Insns {
  cs_insn* insn = nullptr;
  size_t count = 0;
  ~Insns() {
    if (insn)
      cs_free(insn, count);
  }
};

// The System V argument registers and the stack pointer: a probe placed after
// an instruction that writes one of them would read a changed argument.
bool writes_argument_state(csh h, const cs_insn& insn) {
  cs_regs read, written;
  uint8_t nread = 0, nwritten = 0;
  if (cs_regs_access(h, &insn, read, &nread, written, &nwritten) != CS_ERR_OK)
    return true;
  static const x86_reg args[] = {X86_REG_RDI, X86_REG_EDI, X86_REG_RSI, X86_REG_ESI, X86_REG_RDX, X86_REG_EDX,
                                 X86_REG_RCX, X86_REG_ECX, X86_REG_R8,  X86_REG_R8D, X86_REG_R9,  X86_REG_R9D,
                                 X86_REG_RSP, X86_REG_ESP};
  for (uint8_t i = 0; i < nwritten; ++i)
    for (x86_reg a : args)
      if (written[i] == a)
        return true;
  for (uint8_t i = 0; i < insn.detail->x86.op_count; ++i) {
    const cs_x86_op& op = insn.detail->x86.operands[i];
    if (op.type == X86_OP_MEM && (op.access & CS_AC_WRITE))
      return true;
  }
  return false;
}

bool is_conditional_jump(csh h, const cs_insn& insn) {
  return cs_insn_group(h, &insn, CS_GRP_JUMP) && insn.id != X86_INS_JMP &&
         insn.detail->x86.op_count == 1 && insn.detail->x86.operands[0].type == X86_OP_IMM;
}

// Whether the code at `target` returns within a few instructions without
// calling or jumping anywhere: an early exit that does no work (free(NULL)).
bool returns_at_once(csh h, std::span<const uint8_t> code, uint64_t address, uint64_t target) {
  if (target < address || target >= address + code.size())
    return false;
  Insns d;
  d.count = cs_disasm(h, code.data() + (target - address), code.size() - (target - address), target, 4, &d.insn);
  for (size_t i = 0; i < d.count; ++i) {
    if (d.insn[i].id == X86_INS_RET)
      return true;
    if (cs_insn_group(h, &d.insn[i], CS_GRP_JUMP) || cs_insn_group(h, &d.insn[i], CS_GRP_CALL))
      return false;
  }
  return false;
}

}  // namespace

bool kernel_emulates(std::span<const uint8_t> b) {
  if (b.empty())
    return false;
  // push %reg: 50+r, or 41 50+r for r8-r15 (x86 uprobes: push_setup_xol_ops).
  if (b.size() == 1 && b[0] >= 0x50 && b[0] <= 0x57)
    return true;
  if (b.size() == 2 && b[0] == 0x41 && b[1] >= 0x50 && b[1] <= 0x57)
    return true;
  // nop, and the multi-byte 0f 1f nops (emulated since Linux 6.12).
  if (b.size() == 1 && b[0] == 0x90)
    return true;
  size_t i = 0;
  while (i < b.size() && (b[i] == 0x66 || b[i] == 0x2e))
    ++i;
  return b.size() - i >= 2 && b[i] == 0x0f && b[i + 1] == 0x1f;
}

Placement place_probe(std::span<const uint8_t> code, uint64_t address, bool entry_only) {
  Handle h;
  Insns d;
  if (h.h)
    d.count = cs_disasm(h.h, code.data(), code.size(), address, 12, &d.insn);
  Placement entry{0, false, ""};
  if (d.count == 0)
    return entry;
  auto describe = [](const cs_insn& insn) { return std::string(insn.mnemonic) + " " + insn.op_str; };
  entry.emulated = kernel_emulates({d.insn[0].bytes, d.insn[0].size});
  entry.instruction = describe(d.insn[0]);
  if (entry.emulated || entry_only)
    return entry;
  // Walk forward over instructions that change no argument and branches that
  // only leave for an immediate return, to the first emulated instruction.
  for (size_t i = 0; i < d.count; ++i) {
    const cs_insn& insn = d.insn[i];
    if (kernel_emulates({insn.bytes, insn.size}))
      return {insn.address - address, true, describe(insn)};
    if (is_conditional_jump(h.h, insn)) {
      if (!returns_at_once(h.h, code, address, uint64_t(insn.detail->x86.operands[0].imm)))
        return entry;
      continue;
    }
    if (cs_insn_group(h.h, &insn, CS_GRP_JUMP) || cs_insn_group(h.h, &insn, CS_GRP_CALL) ||
        cs_insn_group(h.h, &insn, CS_GRP_RET) || writes_argument_state(h.h, insn))
      return entry;
  }
  return entry;
}

}  // namespace allocscope
