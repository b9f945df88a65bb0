#include "probe/placement/code_reading.h"

namespace allocscope {

void disassemble(std::span<const uint8_t> code, uint64_t address,
                 const std::function<bool(const cs_insn&)>& visit) {
  csh h = 0;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) return;
  cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  cs_option(h, CS_OPT_SKIPDATA, CS_OPT_ON);
  cs_insn* insn = cs_malloc(h);
  const uint8_t* at = code.data();
  size_t left = code.size();
  uint64_t pc = address;
  while (insn && cs_disasm_iter(h, &at, &left, &pc, insn))
    if (insn->detail && !visit(*insn)) break;
  if (insn) cs_free(insn, 1);
  cs_close(&h);
}

std::vector<uint64_t> rip_targets(std::span<const uint8_t> code, uint64_t address) {
  std::vector<uint64_t> out;
  disassemble(code, address, [&](const cs_insn& insn) {
    const cs_x86& x = insn.detail->x86;
    for (uint8_t i = 0; i < x.op_count; ++i)
      if (x.operands[i].type == X86_OP_MEM && x.operands[i].mem.base == X86_REG_RIP)
        out.push_back(insn.address + insn.size + uint64_t(x.operands[i].mem.disp));
    return true;
  });
  return out;
}

}  // namespace allocscope
