#include "record/events/preload_events.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>

#include "abi/preload/entry_codes.h"
#include "abi/preload/java_record.h"
#include "abi/preload/trial_record.h"
#include "base/clocks.h"
#include "host/process.h"

namespace allocscope {

namespace {

PreloadEvents::ProcessFacts facts_from_proc(pid_t pid) {
  return {read_comm(pid), uint64_t(process_start_time(pid) * 1e9)};
}

void copy_comm(char (&to)[AS_COMM_LEN], const std::string& comm) {
  std::memset(to, 0, AS_COMM_LEN);
  std::memcpy(to, comm.data(), std::min<size_t>(comm.size(), AS_COMM_LEN - 1));
}

}  // namespace

PreloadEvents::PreloadEvents(uint64_t rate, ReadFacts read_facts)
    : rate_(rate <= 1 ? 1 : rate),
      agents_(rate),
      read_facts_(read_facts ? std::move(read_facts) : facts_from_proc) {}

void PreloadEvents::translate(uint32_t tgid, uint64_t ring_number, std::span<const uint8_t> payload,
                              const Emit& emit) {
  uint32_t kind = 0;
  if (payload.size() >= sizeof kind) std::memcpy(&kind, payload.data(), sizeof kind);
  if (kind == AS_TRIAL_ALLOC && payload.size() >= sizeof(as_trial_alloc))
    alloc(tgid, ring_number, payload, emit);
  else if (kind == AS_TRIAL_FREE && payload.size() >= sizeof(as_trial_free))
    free(tgid, payload, emit);
  else if (kind == AS_TRIAL_FORK && payload.size() >= sizeof(as_trial_free))
    ++forks_;  // a child that may write into its parent's ring (the channel keeps the ring for it)
  else if (kind == AS_TRIAL_JAVA_ALLOC || kind == AS_TRIAL_JAVA_NOTE)
    agents_.translate(tgid, facts(tgid, ring_number).comm, payload, emit);
  else
    ++malformed_;
}

const PreloadEvents::ProcessFacts& PreloadEvents::facts(uint32_t tgid, uint64_t ring_number) {
  auto it = known_.find(tgid);
  if (it != known_.end() && it->second.ring_number == ring_number) return it->second.facts;
  if (it == known_.end() && known_.size() >= kMaxKnown) known_.clear();
  Known& k = known_[tgid];
  k.ring_number = ring_number;
  k.facts = read_facts_(pid_t(tgid));  // again after an exec: a new name
  return k.facts;
}

void PreloadEvents::alloc(uint32_t tgid, uint64_t ring_number, std::span<const uint8_t> payload,
                          const Emit& emit) {
  as_trial_alloc t;
  std::memcpy(&t, payload.data(), sizeof t);
  std::span<const uint8_t> stack = payload.subspan(sizeof t);
  if (t.walk.len > stack.size()) {
    ++malformed_;
    return;
  }
  if (t.rate != rate_) {  // the statistics assume one rate (as AS_CNT_USDT_RATE)
    ++other_rate_;
    return;
  }
  const ProcessFacts& f = facts(tgid, ring_number);
  uint64_t id = next_stack_++;
  ++trials_;

  // The stack: one frame (the sampler's), the rest to be walked here.
  StackEvent s;
  s.tgid = tgid;
  s.fn = uint16_t(t.code & 0xffff);
  s.stop = AS_STOP_NO_TABLE;
  s.id = id;
  s.start_ns = f.start_ns;
  s.exec_id = ring_number;
  s.comm = f.comm;
  s.ips = {t.walk.ip};
  s.walk = t.walk;
  s.walk_stack.assign(stack.begin(), stack.begin() + t.walk.len);
  emit(std::move(s));

  AllocEvent a;
  a.tgid = tgid;
  a.tid = t.tid;
  a.fn = uint16_t(t.code & 0xffff);
  a.flags = (t.code & AS_USDT_UNTRACKED) ? AS_EVF_LIVE_DROPPED : 0;
  a.ts_ns = t.ts_ns ? t.ts_ns : monotonic_ns();  // when it was allocated, not read
  a.addr = t.addr;
  a.size = t.size;
  a.offset = t.offset;
  a.stack = id;
  a.comm = f.comm;
  emit(std::move(a));
}

void PreloadEvents::free(uint32_t tgid, std::span<const uint8_t> payload, const Emit& emit) {
  as_trial_free f;
  std::memcpy(&f, payload.data(), sizeof f);
  ++frees_;
  emit(FreeEvent{tgid, f.tid, f.ts_ns ? f.ts_ns : monotonic_ns(), f.addr});
}

}  // namespace allocscope

namespace allocscope {

void PreloadEvents::connected(uint32_t tgid, uint64_t ring_number, const Emit& emit) {
  known_.erase(tgid);
  const ProcessFacts& f = facts(tgid, ring_number);
  as_proc_event e{};
  e.kind = AS_EV_EXEC;
  e.tgid = tgid;
  e.ts_ns = monotonic_ns();
  e.ended = AS_ENDED_IN_PROCESS;
  struct stat st {};
  if (stat(("/proc/" + std::to_string(tgid) + "/exe").c_str(), &st) == 0) {
    e.dev = uint32_t(major(st.st_dev) << 20 | minor(st.st_dev));  // the kernel's encoding
    e.ino = st.st_ino;
  }
  copy_comm(e.comm, f.comm);
  emit(ProcessEvent{e});
}

void PreloadEvents::forked_and_gone(uint32_t tgid, uint32_t parent, uint64_t ring_number) {
  if (known_.contains(tgid)) return;
  ProcessFacts f = facts(parent, ring_number);
  known_[tgid] = {ring_number, std::move(f)};
}

void PreloadEvents::exited(uint32_t tgid, const Emit& emit) {
  as_proc_event e{};
  e.kind = AS_EV_EXIT;
  e.tgid = tgid;
  e.ts_ns = monotonic_ns();
  e.ended = AS_ENDED_IN_PROCESS;
  if (auto it = known_.find(tgid); it != known_.end()) {
    copy_comm(e.comm, it->second.facts.comm);
    known_.erase(it);
  }
  emit(ProcessEvent{e});
}

}  // namespace allocscope
