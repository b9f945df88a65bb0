// libbpf's own messages: silent unless asked for (-v). Failures are
// reported by allocscope with their context; a feature probe's expected
// refusals are no news at all.
#pragma once

namespace allocscope {

// Returns the setting it replaces.
bool set_libbpf_verbose(bool verbose);

}  // namespace allocscope
