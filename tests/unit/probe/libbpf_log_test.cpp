// The verifier's refusal read from libbpf's messages, as Debian's 6.12
// and 6.1 kernels wrote them for allocscope's programs before they were
// rewritten for those verifiers.
#include "probe/libbpf_log.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

TEST(VerifierRefusal, ProgramAndLastWordOfItsLog) {
  std::string messages =
      "libbpf: prog 'usdt_alloc': BPF program load failed: Permission denied\n"
      "libbpf: prog 'usdt_alloc': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx() R10=fp0\n"
      "Func#9 ('unwind_step') is safe for any args that match its prototype\n"
      "combined stack size of 3 calls is 528. Too large\n"
      "processed 26450 insns (limit 1000000) max_states_per_insn 15 total_states 1184\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'usdt_alloc': failed to load: -13\n";
  VerifierRefusal r = verifier_refusal(messages);
  EXPECT_EQ(r.program, "usdt_alloc");
  EXPECT_EQ(r.reason, "combined stack size of 3 calls is 528. Too large");
}

TEST(VerifierRefusal, LogWithoutStatisticsEndsAtItsEnd) {
  VerifierRefusal r = verifier_refusal(
      "libbpf: prog 'walk_frame': BPF program load failed: Invalid argument\n"
      "libbpf: prog 'walk_frame': -- BEGIN PROG LOAD LOG --\n"
      "1833: (85) call bpf_map_lookup_elem#1\n"
      "R2 type=mem expected=fp, pkt, pkt_meta, map_key, map_value\n"
      "-- END PROG LOAD LOG --\n");
  EXPECT_EQ(r.program, "walk_frame");
  EXPECT_EQ(r.reason, "R2 type=mem expected=fp, pkt, pkt_meta, map_key, map_value");
}

// Refused after the verifier was done (a program array of another kind, say):
// the log's last line is a success note, no reason.
TEST(VerifierRefusal, SuccessNotesAreNoReason) {
  VerifierRefusal r = verifier_refusal(
      "libbpf: prog 'alloc_session': BPF program load failed: Invalid argument\n"
      "libbpf: prog 'alloc_session': -- BEGIN PROG LOAD LOG --\n"
      "Func#7 ('unwind_step') is safe for any args that match its prototype\n"
      "processed 13798 insns (limit 1000000) max_states_per_insn 7\n"
      "-- END PROG LOAD LOG --\n");
  EXPECT_EQ(r.program, "alloc_session");
  EXPECT_EQ(r.reason, "");
}

TEST(VerifierStats, InstructionsAndEachFunctionsStack) {
  VerifierStats s = parse_verifier_stats(
      "verification time 1234 usec\nstack depth 224+16+104+0+0+0+80+40\n"
      "processed 53511 insns (limit 1000000) max_states_per_insn 15 total_states 1184\n");
  EXPECT_EQ(s.insns, 53511u);
  EXPECT_EQ(s.stack_depths, (std::vector<uint32_t>{224, 16, 104, 0, 0, 0, 80, 40}));
  EXPECT_TRUE(parse_verifier_stats("").stack_depths.empty());
}

TEST(VerifierRefusal, NoRefusalNoNames) {
  VerifierRefusal r = verifier_refusal("libbpf: map 'events': created successfully, fd=4\n");
  EXPECT_EQ(r.program, "");
  EXPECT_EQ(r.reason, "");
  EXPECT_EQ(verifier_refusal("libbpf: prog 'x': BPF program load failed: Permission denied\n").reason, "");
}

}  // namespace
}  // namespace allocscope
