// The choices of how allocscope probes and walks, apart from the code that
// acts on them, so that configuration needs no libbpf.
#pragma once

namespace allocscope {

// How probes reach the kernel: uprobe sessions (kernel 6.13+: one link per
// library, the return probe only on calls the entry asks it for), or classic
// uprobes and uretprobes (a return probe on every call).
enum class ProbeMode { Auto, Session, Classic };

const char* probe_mode_name(ProbeMode m);

// How stacks are walked in the kernel: the binaries' call frame
// information (with frame pointers where there is none), or frame pointers.
enum class UnwindMode { Fp, Dwarf };

}  // namespace allocscope
