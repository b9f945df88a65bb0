// The records a runtime's agent inside a traced process writes into the
// process's ring (java_record.h: a Java object the JVM sampled, with its
// Java stack named; why the agent samples nothing), decoded into the events
// the sink takes. The objects' deaths come as any sampled block's free
// (as_trial_free), their tags for addresses. Pure logic.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "record/events/events.h"

namespace allocscope {

class AgentRecords {
 public:
  using Emit = std::function<void(Event)>;
  // Stack ids of its own, above the preload library's (PreloadEvents); the
  // kernel's are hashes, which meet them by chance only (2^-64 a pair).
  static constexpr uint64_t kFirstStack = uint64_t(3) << 62;
  // An agent's stacks' exec id: an instance one made takes the kernel's
  // start and exec from the first stack of the kernel's (EventSink).
  static constexpr uint64_t kAgentExec = UINT64_MAX;

  // rate: the session's (1: exact).
  explicit AgentRecords(uint64_t rate) : rate_(rate <= 1 ? 1 : rate) {}

  // Whether `payload` (a record of process `tgid`, named `comm`) is an
  // agent's: then its events went to `emit`, or it was counted (malformed,
  // at another rate).
  bool translate(uint32_t tgid, const std::string& comm, std::span<const uint8_t> payload, const Emit& emit);

  uint64_t java_samples() const { return java_samples_; }
  uint64_t other_rate() const { return other_rate_; }
  uint64_t malformed() const { return malformed_; }

 private:
  void java_alloc(uint32_t tgid, const std::string& comm, std::span<const uint8_t> payload, const Emit& emit);

  uint64_t rate_;
  uint64_t next_stack_ = kFirstStack;
  uint64_t java_samples_ = 0, other_rate_ = 0, malformed_ = 0;
};

}  // namespace allocscope
