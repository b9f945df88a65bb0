// Ring buffer records -> profile. Samples are aggregated per process
// instance (ProcessTable); each stack arrives once, already unwound by the
// kernel, with the mappings of its frames, and is resolved to its mappings
// while its process is known; later samples name it by its id. Lifecycle
// events end instances and drop what they held live. In exact mode the
// kernel keeps the totals per stack id, and the sink folds them in.
#pragma once

#include <sys/types.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "allocscope.h"
#include "model/process_table.h"
#include "model/profile.h"
#include "record/events/events.h"
#include "record/events/sink_hooks.h"
#include "record/events/waiting_events.h"
#include "symbols/symbolizer.h"

namespace allocscope {

class CgroupNames;
class Runtimes;

// A kernel event's comm, up to its first NUL.
std::string comm_of(const char (&comm)[AS_COMM_LEN]);

// Samples a process lost, by cause.
struct ProcessDrops {
  std::string comm;
  uint64_t live_full = 0, stack_table_full = 0, stack_lost = 0;
};

class EventSink {
 public:
  // per_process false: stacks of one name merge across processes.
  EventSink(Profile& profile, Symbolizer& symbolizer, SinkHooks hooks, size_t max_stacks,
            bool per_process = true);

  // The language runtimes told of processes and files, which name their
  // frames in the stacks (the recorder's).
  void use_runtimes(Runtimes* runtimes) { runtimes_ = runtimes; }
  // Where the kernel's cgroup_mkdir events go (system-wide recordings).
  void use_cgroup_names(CgroupNames* names) { cgroup_names_ = names; }
  // Exact mode whose every allocation comes as a sample event (the preload
  // library's, without BPF), not as the kernel's totals per stack.
  void exact_as_samples() { kernel_totals_ = false; }
  // Stack ids from `first` on name one sample each (the preload library's
  // trials, each walked on its own): forgotten once their sample is in.
  void one_shot_stacks_from(uint64_t first) { one_shot_from_ = first; }

  // Takes one event; false when the reader should return to its loop
  // (the deadline set by yield_at has passed).
  bool take(Event event);
  // ... one record of the kernel's ring buffer (decode_kernel_event).
  bool operator()(std::span<const uint8_t> kernel_record);
  void yield_at(uint64_t monotonic_ms) { yield_at_ms_ = monotonic_ms; }
  // ... and once the live estimate reaches `bytes` (--snapshot-above).
  void yield_above(double bytes) { yield_above_bytes_ = bytes; }

  // Exact mode: folds the kernel's totals (all of them, read at once) into
  // the profile, as what changed since the last call.
  void absorb_exact(std::span<const ExactEntry> totals);
  // Exact mode: the allocation times of the kernel's live entries, by profile stack.
  void set_live_times(std::span<const std::pair<as_live_key, as_live_value>> live);
  // Exact mode: the live entries ended instances left in the kernel since
  // the last sweep (their stacks' allocations less frees when they ended;
  // fewer if some were never entered: a full map).
  uint64_t stale_live_entries() const { return stale_entries_; }
  void swept() { stale_entries_ = 0; }
  // Exact mode: whether the kernel still keeps totals of the instance's
  // stacks (it has not ended, or it is a root kept to the end).
  bool has_kernel_totals(uint32_t instance) const { return instance_stacks_.contains(instance); }

  const std::vector<StackOrigin>& origins() const { return origins_; }
  // The profile renumbered its stacks (Profile::forget's or fold's remap):
  // origins follow, those of stacks gone go, and ended instances left
  // without a stack give their ids back.
  void forget_stacks(std::span<const uint32_t> remap);
  // A folded instance (ProcessTable::add_folded) for what ended instances leave.
  uint32_t add_folded(std::string_view comm) { return processes_.add_folded(comm); }
  // Moves the stacks of ended instances to folded ones (`into`, by
  // instance), their addresses named at their files' offsets so that the
  // same code of each run folds into one stack (Profile::fold). Returns
  // each old stack index's new one.
  std::vector<uint32_t> fold_stacks(const std::unordered_map<uint32_t, uint32_t>& into);
  const ProcessTable& processes() const { return processes_; }
  // Process `tgid` is being entered (it will sample in process, its probes
  // taken out): the live samples the probes took, whose frees will come
  // through its library, which is handed their addresses. Until then their
  // frees still pass the probes; once the library took them (`taken`) the
  // kernel's entries for them are deleted, else they are the kernel's again.
  std::vector<uint64_t> hand_over_live(uint32_t tgid);
  void end_hand_over(uint32_t tgid, std::span<const uint64_t> addrs, bool taken);
  // ... or, when the library could not take them, forgotten (their frees
  // will not be seen); their allocations stay.
  void forget_probed_live(uint32_t tgid);
  // Those the probes took from the hand-over (`from_ns`) to `to_ns`, when
  // the process stopped being theirs, stay live: their frees after the
  // probes are out will not be seen (in use may be high by their bytes),
  // and forgetting them undercounts a process that keeps its blocks (the
  // span is a few ms here, hundreds on a loaded machine). Counted; returns
  // how many.
  size_t count_probed_between(uint32_t tgid, uint64_t from_ns, uint64_t to_ns);
  // Process instances with samples recorded (not filtered out).
  uint64_t recorded_processes() const { return processes_.made() - processes_.rejected(); }
  const std::map<uint32_t, ProcessDrops>& drops() const { return drops_; }
  uint64_t stacks_seen() const { return stacks_seen_; }
  size_t stacks_held() const { return stacks_.size(); }  // kernel stack ids known now
  uint64_t stacks_truncated() const { return stacks_truncated_; }
  // Walks the kernel stopped for want of a table, finished here.
  uint64_t walks_finished() const { return walks_finished_; }
  // Of those, the ones that waited for their table to be built, and the
  // ones cut short where it was not in yet (their process ran another
  // program, they waited too long, or the held events outgrew their room).
  uint64_t walks_waited() const { return walks_waited_; }
  uint64_t walks_cut_waiting() const { return walks_cut_waiting_; }
  // Those walks by why they ended (enum as_stop): the kernel counts its
  // own, these are the ones finished here.
  static constexpr size_t kStops = 10;
  const std::array<uint64_t, kStops>& walk_stops() const { return walk_stops_; }

  // Walks that wait for tables are done again when `tables_in` (some table
  // came in since the last call), and cut short once they waited too long.
  void retry_waiting(uint64_t now_ns, bool tables_in);
  // The end of a recording: every held event goes in, walks as far as the
  // tables allow.
  void release_all_waiting();
  bool has_waiting() const { return !waiting_.empty(); }
  // Samples that named a stack the sink never received (or had to drop).
  uint64_t stack_lost() const { return stack_lost_; }
  uint64_t stack_lost_bytes() const { return stack_lost_bytes_; }
  // In-process samples (a provider that reports only weights) taken at
  // another rate than the session's: not counted.
  uint64_t other_rate() const { return other_rate_; }
  // Samples of stacks the sink's table had no room for (--max-stacks).
  uint64_t table_full() const { return table_full_; }
  uint64_t table_full_bytes() const { return table_full_bytes_; }
  // Running instances whose process `alive` says is gone, at this call and
  // the one before, with no exit event read between (or at this call alone
  // once every event is read: `drained`): theirs was lost (the ring buffer
  // was full). Each ends as an exit would end it; returns how many.
  size_t end_vanished(const std::function<bool(uint32_t)>& alive, bool drained = false);
  uint64_t ended_unseen() const { return ended_unseen_; }
  // Instances ended by a stack of a later program or process with their
  // pid (its exec or exit event was lost).
  uint64_t ended_by_stacks() const { return ended_by_stacks_; }
  // Live samples whose frees go unseen after entries (count_probed_between).
  uint64_t entry_frees_unseen() const { return entry_frees_unseen_; }
  // The name a process had at its last exec or exit, for processes that
  // sent no sample (all lost); "" when not known.
  std::string last_name(uint32_t tgid) const;

 private:
  struct KnownStack {
    uint32_t instance = 0;
    uint16_t fn = 0;
    std::vector<uint64_t> ips;  // innermost first; kTruncatedFrame last when cut short
    StackOrigin origin;         // resolved on arrival, while the process lives
    bool one_shot = false;      // an agent's: serves one sample
  };

  void dispatch(Event&& event);
  void hold(uint32_t tgid, Event event, uint64_t stack, uint64_t addr);
  // Feeds the held events of `tgid` again; `cut`: walks end where a table is missing.
  void release_waiting(uint32_t tgid, bool cut);
  void on_stack(StackEvent&& ev);
  void on_alloc(AllocEvent&& e);
  void on_free(const FreeEvent& e);
  void on_process_event(const ProcessEvent& e);
  void on_process(const as_proc_event& e);
  void on_exec(const as_proc_event& e);
  // A process held for its new file goes on once its tables are in (if the
  // event's hold still holds it).
  void release_when_prepared(const as_proc_event& e);
  void end_instance(uint32_t tgid, bool exited, bool in_process);
  bool end_if_replaced(uint32_t id, const StackEvent& head);
  bool lost_for_test(const as_proc_event& exec);
  void finish_exact(uint32_t instance, bool keep_live);
  void forget_untracked(uint32_t tgid, uint64_t addr, uint16_t flags);
  std::optional<uint32_t> instance_for(const StackEvent& head);
  void count_drops(uint32_t tgid, const std::string& comm, bool live_full, bool stack_lost, bool table_full);
  static constexpr uint16_t kNoAllocator = UINT16_MAX;  // origin()'s fn: none to look up
  StackOrigin origin(uint32_t tgid, const std::string& comm, uint16_t fn, std::span<const uint64_t> ips);
  void fold_own_frames(pid_t pid, std::span<const Mapping> seen, std::vector<uint64_t>& ips);
  std::optional<uint32_t> profile_stack(const KnownStack& s);
  void compact_mappings();
  // A stack's addresses and origin as its folded instance `into` keeps them.
  std::pair<Profile::FoldTo, StackOrigin> folded_stack(uint32_t stack, uint32_t into);
  void note_new_profile_stack(size_t stacks_before, const KnownStack& s);
  void add_exact_delta(const KnownStack& s, const as_exact_totals& now, const as_exact_totals& before);

  Profile& profile_;
  Symbolizer& symbolizer_;
  Runtimes* runtimes_ = nullptr;
  std::array<uint64_t, kStops> walk_stops_{};
  bool kernel_totals_ = true;
  uint64_t one_shot_from_ = UINT64_MAX;  // exact mode: the kernel keeps the totals (see exact_as_samples)
  CgroupNames* cgroup_names_ = nullptr;
  SinkHooks hooks_;
  size_t max_stacks_;
  bool per_process_;
  ProcessTable processes_;
  std::vector<StackOrigin> origins_;                                     // by profile stack index
  std::unordered_map<uint64_t, KnownStack> stacks_;                      // by kernel stack id
  std::unordered_map<uint32_t, std::vector<uint64_t>> instance_stacks_;  // instance -> its stack ids
  std::unordered_map<uint64_t, as_exact_totals> exact_seen_;             // what absorb_exact added so far
  uint64_t stale_entries_ = 0;  // live entries ended instances left, until swept
  static constexpr size_t kMaxRefused = 1 << 16;
  std::unordered_set<uint64_t> refused_;  // stack ids the full table turned away (bounded: drop reports)
  std::map<uint32_t, ProcessDrops> drops_;
  std::unordered_map<uint32_t, std::string> last_names_;  // bounded: see on_process
  std::unordered_map<uint32_t, uint32_t> vanishing_;      // tgid -> running instance found gone once
  uint64_t ended_unseen_ = 0, ended_by_stacks_ = 0, entry_frees_unseen_ = 0;
  // Long enough for a large program's table on a loaded machine.
  static constexpr uint64_t kMaxWaitNs = 10'000'000'000;
  static constexpr size_t kMaxWaitingBytes = 64 << 20;
  WaitingEvents waiting_{kMaxWaitingBytes};
  bool replaying_ = false, cutting_ = false;  // feeding held events again
  uint64_t replay_since_ns_ = 0;
  uint64_t walks_waited_ = 0, walks_cut_waiting_ = 0;
  uint64_t stacks_seen_ = 0, stacks_truncated_ = 0, walks_finished_ = 0;
  uint64_t stack_lost_ = 0, stack_lost_bytes_ = 0, table_full_ = 0, table_full_bytes_ = 0;
  uint64_t other_rate_ = 0;
  uint64_t yield_at_ms_ = UINT64_MAX;
  double yield_above_bytes_ = INFINITY;
  uint32_t events_since_clock_ = 0;
};

}  // namespace allocscope
