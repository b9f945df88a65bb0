// libbpf's own messages: silent unless asked for (-v). Failures are
// reported by allocscope with their context; a feature probe's expected
// refusals are no news at all. A load's messages can be kept, so that a
// refusal is told in one line (which program, the verifier's last word)
// with the whole log behind -v.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace allocscope {

// Returns the setting it replaces.
bool set_libbpf_verbose(bool verbose);

// While one lives, libbpf's messages are also kept (one at a time).
class LibbpfCapture {
 public:
  LibbpfCapture();
  ~LibbpfCapture();
  LibbpfCapture(const LibbpfCapture&) = delete;
  LibbpfCapture& operator=(const LibbpfCapture&) = delete;
  std::string text() const;
};

// The verifier's refusal in libbpf's messages: the program it refused and
// the last line of its log before the statistics ("combined stack size of 3
// calls is 528. Too large"); empty fields where there is none.
struct VerifierRefusal {
  std::string program, reason;
};
VerifierRefusal verifier_refusal(std::string_view messages);

// What the verifier says of a program it accepted, with statistics asked
// for (log level 4): "processed N insns ..." and "stack depth 96+32+0", the
// bytes of stack of each of its functions (the main one first).
struct VerifierStats {
  uint64_t insns = 0;
  std::vector<uint32_t> stack_depths;
};
VerifierStats parse_verifier_stats(std::string_view log);

}  // namespace allocscope
