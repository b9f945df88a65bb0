// Every BPF program a session may load, in one table: whether this session
// loads it (its mode, the kernel's features, the recording's options), the
// attach type the kernel checks at load, and who attaches it. A new program
// is a row here.
#pragma once

#include <cstdint>
#include <vector>

#include "allocscope.h"
#include "allocscope.skel.h"
#include "probe/modes.h"
#include "probe/session/bpf_session.h"

namespace allocscope {

enum class AttachedBy {
  Session,  // by the session's calls, per file or process (allocator probes, USDT notes, sweep_live)
  Open,     // once, when the session opens (the lifecycle's tracepoints and kprobes)
};

struct ProgramUse {
  bpf_program* program;
  bool used;
  uint32_t attach_type;  // the expected attach type (uprobe sessions, multi links); 0: its section's
  AttachedBy by;
};

// `mode`: the probe mode chosen for the kernel (Session or Classic).
std::vector<ProgramUse> program_uses(allocscope_bpf* skel, const SessionConfig& c, ProbeMode mode);

// The classic uprobe program of an entry kind.
bpf_program* entry_program(allocscope_bpf* s, as_fn fn);

// The Go runtime's probe programs (classic and multi), which a session loads
// only when it first probes a Go program (BpfSession::load_go_programs).
bool is_go_program(allocscope_bpf* s, const bpf_program* program);

// Marks to load, with the attach types the kernel checks at load, the
// programs of program_uses() this session uses: its Go programs alone
// (`go`), or all but them.
void select_programs(allocscope_bpf* skel, const SessionConfig& c, ProbeMode mode, bool go);

}  // namespace allocscope
