// `allocscope check`: whether this machine lets allocscope record, and why
// not. The kernel's features (probed), the privileges, and a load of the real
// BPF programs in each configuration record and agent use.
#pragma once

#include <string>

namespace allocscope {

struct CheckConfig {
  bool verbose = false;        // each probe's finding, and the verifier's log of a refused load
  bool json = false;           // the report as JSON
  std::string force_fallback;  // --force-fallback: kernel features taken as missing ("uprobe_session")
};

// Prints the report to stdout; 0 when record and agent can run here.
int check(const CheckConfig& config);

}  // namespace allocscope
