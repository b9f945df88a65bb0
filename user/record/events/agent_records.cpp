#include "record/events/agent_records.h"

#include <cstring>

#include "abi/preload/entry_codes.h"
#include "abi/preload/java_record.h"
#include "base/clocks.h"

namespace allocscope {

bool AgentRecords::translate(uint32_t tgid, const std::string& comm, std::span<const uint8_t> payload,
                             const Emit& emit) {
  uint32_t kind = 0;
  if (payload.size() >= sizeof kind) std::memcpy(&kind, payload.data(), sizeof kind);
  if (kind == AS_TRIAL_JAVA_ALLOC) {
    java_alloc(tgid, comm, payload, emit);
    return true;
  }
  if (kind != AS_TRIAL_JAVA_NOTE) return false;
  as_java_note n{};
  if (payload.size() < sizeof n) {
    ++malformed_;
    return true;
  }
  std::memcpy(&n, payload.data(), sizeof n);
  std::span<const uint8_t> text = payload.subspan(sizeof n);
  if (n.len > text.size()) {
    ++malformed_;
    return true;
  }
  emit(AgentNote{tgid, "jvm", std::string(reinterpret_cast<const char*>(text.data()), n.len)});
  return true;
}

void AgentRecords::java_alloc(uint32_t tgid, const std::string& comm, std::span<const uint8_t> payload,
                              const Emit& emit) {
  as_java_alloc a{};
  if (payload.size() < sizeof a) {
    ++malformed_;
    return;
  }
  std::memcpy(&a, payload.data(), sizeof a);
  std::span<const uint8_t> frames = payload.subspan(sizeof a);
  if (a.bytes > frames.size() || (a.frames & ~AS_JAVA_CUT) > AS_JAVA_MAX_FRAMES) {
    ++malformed_;
    return;
  }
  if ((a.rate <= 1 ? 1 : a.rate) != rate_) {  // the statistics assume one rate
    ++other_rate_;
    return;
  }
  ++java_samples_;
  uint64_t id = next_stack_++;
  StackEvent s;
  s.tgid = tgid;
  s.fn = AS_CODE_JAVA_NEW;
  s.stop = (a.frames & AS_JAVA_CUT) ? AS_STOP_DEPTH : AS_STOP_COMPLETE;
  s.exec_id = kAgentExec;  // the kernel's names for the instance are not known here
  s.id = id;
  s.comm = comm;
  s.agent = "jvm";
  s.runtime_part.assign(frames.begin(), frames.begin() + a.bytes);
  emit(std::move(s));

  AllocEvent e;
  e.tgid = tgid;
  e.tid = a.tid;
  e.fn = AS_CODE_JAVA_NEW;
  // The JVM's sampler says not where its sampled byte fell (its law is
  // allocscope's); an object it could not tag has no death to be seen.
  e.flags = AS_EVF_NO_OFFSET | AS_EVF_FREE_IN_RING | (a.addr ? 0 : AS_EVF_UNTRACKED);
  e.ts_ns = a.ts_ns ? a.ts_ns : monotonic_ns();
  e.addr = a.addr;
  e.size = a.size;
  e.stack = id;
  e.comm = comm;
  emit(std::move(e));
}

}  // namespace allocscope
