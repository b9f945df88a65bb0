// /tmp/perf-PID.map, the file JIT compilers write to name their code
// ("START SIZE name" per line, hex addresses, with or without 0x).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace allocscope {

struct JitSymbol {
  uint64_t start = 0, end = 0;
  std::string name;
};

// Sorted by start; unreadable lines are skipped. A later entry for the same
// start (code replaced) wins.
std::vector<JitSymbol> parse_perf_map(std::string_view text);

// The symbol that holds `addr`, or nullptr.
const JitSymbol* find_jit_symbol(const std::vector<JitSymbol>& symbols, uint64_t addr);

}  // namespace allocscope
