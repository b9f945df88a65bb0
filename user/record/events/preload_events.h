// A recording without BPF: the preload library's ring records (a sampled
// trial with its registers and stack, a sampled block's free) decoded into
// the events the sink takes (events.h), as the kernel's are. A trial
// becomes a stack whose walk stopped at its first frame for want of a table
// (AS_STOP_NO_TABLE), with the walk to finish and its stack bytes: the sink
// finishes such walks in userspace with the same tables and step. Pure
// logic but for /proc reads of a process's name and start.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "allocscope.h"
#include "record/events/agent_records.h"
#include "record/events/events.h"

namespace allocscope {

class PreloadEvents {
 public:
  using Emit = std::function<void(Event)>;
  // What /proc says of a process: its name and start (ns, any fixed clock).
  struct ProcessFacts {
    std::string comm;
    uint64_t start_ns = 0;
  };
  using ReadFacts = std::function<ProcessFacts(pid_t)>;

  // rate: the session's (1: exact). read_facts: from /proc by default.
  explicit PreloadEvents(uint64_t rate, ReadFacts read_facts = {});

  // The events record `payload` of process `tgid` stands for, in order;
  // `ring_number` is the ring's (PreloadChannel: each new ring a higher
  // one), which the events carry as the exec generation: a process that
  // ran another program writes into a new ring.
  void translate(uint32_t tgid, uint64_t ring_number, std::span<const uint8_t> payload, const Emit& emit);

  // Process `tgid` connected for ring `ring_number`: it runs a program
  // (the first, or another after exec): its exec event, which ends the
  // instance of the program it ran before.
  void connected(uint32_t tgid, uint64_t ring_number, const Emit& emit);
  // A child `tgid` forked by `parent` (it writes into the parent's ring)
  // and gone before /proc was read: named as its parent.
  void forked_and_gone(uint32_t tgid, uint32_t parent, uint64_t ring_number);
  // Process `tgid` is gone (every record it wrote read): its exit event.
  void exited(uint32_t tgid, const Emit& emit);

  uint64_t forks() const { return forks_; }
  uint64_t trials() const { return trials_ + agents_.java_samples(); }        // turned into samples
  uint64_t frees() const { return frees_; }                                   // frees of sampled blocks
  uint64_t other_rate() const { return other_rate_ + agents_.other_rate(); }  // not counted
  uint64_t malformed() const { return malformed_ + agents_.malformed(); }     // of no known kind or length
  uint64_t stacks_made() const { return next_stack_ - kFirstStack; }

  static constexpr uint64_t kFirstStack = uint64_t(1) << 62;  // apart from the kernel's stack ids

 private:
  void alloc(uint32_t tgid, uint64_t ring_number, std::span<const uint8_t> payload, const Emit& emit);
  void free(uint32_t tgid, std::span<const uint8_t> payload, const Emit& emit);
  const ProcessFacts& facts(uint32_t tgid, uint64_t ring_number);

  struct Known {
    uint64_t ring_number = 0;
    ProcessFacts facts;
  };
  static constexpr size_t kMaxKnown = 4096;  // processes remembered; forgotten all at once beyond

  uint64_t rate_;
  AgentRecords agents_;  // the JVM's sampled objects
  ReadFacts read_facts_;
  std::unordered_map<uint32_t, Known> known_;
  uint64_t next_stack_ = kFirstStack;
  uint64_t trials_ = 0, frees_ = 0, forks_ = 0, other_rate_ = 0, malformed_ = 0;
};

}  // namespace allocscope
