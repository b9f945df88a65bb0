// What a recording covers, as its config implies.
#pragma once

#include "record/record.h"

namespace allocscope {

// Descendants are followed when asked for, and by default with -- CMD.
inline bool follows_children(const RecordConfig& c) { return c.children.value_or(!c.command.empty()); }
// System-wide probes, one set per C library file, with the kernel's process
// table deciding who is traced; else probes per process.
inline bool system_wide(const RecordConfig& c) { return c.all || follows_children(c); }
// Whether only the kernel table's members are traced (-p, -- CMD, --all -p),
// rather than every process not ignored (--all).
inline bool members_only(const RecordConfig& c) { return !c.all || !c.pids.empty(); }
// Rate 1: the kernel counts every allocation per stack.
inline bool exact_mode(const RecordConfig& c) { return c.rate <= 1; }

}  // namespace allocscope
