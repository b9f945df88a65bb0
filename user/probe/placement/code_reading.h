// x86-64 code read with capstone, for what a probe or an entry needs to know
// of a function's instructions. Pure logic on the code bytes.
#pragma once

#include <capstone/capstone.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace allocscope {

// Each instruction of `code` (at virtual address `address`) with its
// details, to `visit` until it returns false; bytes that are no instruction
// (Go pads with int3) are passed over.
void disassemble(std::span<const uint8_t> code, uint64_t address,
                 const std::function<bool(const cs_insn&)>& visit);

// The addresses of memory a function's code reads or writes relative to
// rip (`code` at virtual address `address`).
std::vector<uint64_t> rip_targets(std::span<const uint8_t> code, uint64_t address);

}  // namespace allocscope
