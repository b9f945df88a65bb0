// Loading an instance of allocscope's BPF object (the session's, and the Go
// programs' that shares its maps): each program's verifier statistics when
// asked for, and a refusal told in one line, its whole log left to -v.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "probe/libbpf_log.h"

struct allocscope_bpf;

namespace allocscope {

// Why a BPF call failed with `err`, when privileges may be the cause.
std::string privilege_hint(int err);

// Loads `skel` on the kernel `release`; with `stats`, the verifier's
// statistics of each program it loaded are appended to it.
using ProgramStats = std::vector<std::pair<std::string, VerifierStats>>;
Result<void> load_object(allocscope_bpf* skel, const std::string& release, ProgramStats* stats);

}  // namespace allocscope
