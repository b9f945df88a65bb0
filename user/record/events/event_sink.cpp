#include "record/events/event_sink.h"

#include <algorithm>
#include <cstring>

#include "base/clocks.h"
#include "host/cgroup_names.h"
#include "host/preload_library.h"
#include "runtime/registry.h"
#include "stats/sampling.h"

namespace allocscope {

std::string comm_of(const char (&comm)[AS_COMM_LEN]) { return std::string(comm, strnlen(comm, AS_COMM_LEN)); }

namespace {

template <typename... F>
struct Visit : F... {
  using F::operator()...;
};
template <typename... F>
Visit(F...) -> Visit<F...>;  // clang 16 deduces no aggregate's arguments

// The kernel's log2 lifetime buckets (struct as_exact_totals), each counted
// at its geometric middle.
DurationHistogram lifetimes_of(const as_exact_totals& now, const as_exact_totals& before) {
  DurationHistogram h;
  for (int b = 0; b < AS_LIFETIME_BUCKETS; ++b) {
    uint32_t n = now.lifetimes[b] - before.lifetimes[b];
    if (n) h.add(uint64_t(double(1ull << (b + AS_LIFETIME_FIRST_LOG2)) * 1.4142135623730951), n);
  }
  return h;
}

}  // namespace

EventSink::EventSink(Profile& profile, Symbolizer& symbolizer, SinkHooks hooks, size_t max_stacks,
                     bool per_process)
    : profile_(profile),
      symbolizer_(symbolizer),
      hooks_(hooks),
      max_stacks_(max_stacks),
      per_process_(per_process) {}

bool EventSink::operator()(std::span<const uint8_t> kernel_record) {
  auto event = decode_kernel_event(kernel_record);
  return !event || take(std::move(*event));
}

bool EventSink::take(Event event) {
  if (hooks_.unwind.tables_built()) {  // in at once: the kernel's walks stop waiting for them too
    hooks_.unwind.collect_tables();
    retry_waiting(monotonic_ns(), true);
  }
  bool alloc = std::holds_alternative<AllocEvent>(event);
  dispatch(std::move(event));
  if (alloc && profile_.live_bytes() >= yield_above_bytes_) return false;
  // The clock is read now and then: a reader that lags returns to its loop
  // (outputs, progress) at the deadline all the same.
  if (++events_since_clock_ < 256) return true;
  events_since_clock_ = 0;
  return now_ms() < yield_at_ms_;
}

void EventSink::dispatch(Event&& event) {
  std::visit(Visit{
                 [this](StackEvent& e) { on_stack(std::move(e)); },
                 [this](AllocEvent& e) { on_alloc(std::move(e)); },
                 [this](FreeEvent& e) { on_free(e); },
                 [this](ProcessEvent& e) { on_process_event(e); },
                 [this](CgroupEvent& e) {
                   if (!cgroup_names_) return;
                   if (e.gone)
                     cgroup_names_->removed(e.id, now_ms());
                   else
                     cgroup_names_->learn(e.id, std::move(e.path));
                 },
                 [this](TableNeeded& e) { hooks_.unwind.need_table(e.tgid, e.vma); },
                 [this](AgentNote& e) {
                   if (runtimes_) runtimes_->on_agent_note(pid_t(e.tgid), e.agent, e.text);
                 },
             },
             event);
}

void EventSink::on_free(const FreeEvent& e) {
  if (waiting_.must_wait(e.tgid, 0, e.addr))
    hold(e.tgid, e, 0, e.addr);
  else if (auto id = processes_.find(e.tgid))
    profile_.on_free(*id, e.addr, e.ts_ns);
}

void EventSink::on_process_event(const ProcessEvent& pe) {
  const as_proc_event& e = pe.e;
  if (e.kind == AS_EV_EXITING) {
    // A CPython process at _exit: the code objects of its stacks before
    // this event are read (on_stack reads them first), so it may end now.
    if (e.held) hooks_.kernel.release_held(e.tgid, e.hold);
    return;
  }
  if (e.kind == AS_EV_EXEC && lost_for_test(e)) return;
  if (e.kind == AS_EV_EXIT && waiting_.holds(e.tgid)) {
    hold(e.tgid, pe, 0, 0);  // its stacks are still walked whole
    return;
  }
  // The old program's mappings go now: what waits is walked as far as it
  // can be, after a short wait for its tables (a small file's take
  // milliseconds; a shell's job may exec as soon as it starts).
  if (e.kind == AS_EV_EXEC && waiting_.holds(e.tgid)) {
    constexpr uint64_t kMaxExecWaitMs = 500;
    hooks_.unwind.wait_for_walks(e.tgid, kMaxExecWaitMs);
    release_waiting(e.tgid, true);
  }
  on_process(e);
}

void EventSink::hold(uint32_t tgid, Event event, uint64_t stack, uint64_t addr) {
  waiting_.hold(tgid, std::move(event), stack, addr, replaying_ ? replay_since_ns_ : monotonic_ns());
  if (replaying_) return;
  while (waiting_.full()) release_waiting(waiting_.processes().front(), true);
}

void EventSink::release_waiting(uint32_t tgid, bool cut) {
  uint64_t since = waiting_.since_ns(tgid);
  std::deque<Event> events = waiting_.take(tgid);
  bool was_replaying = replaying_, was_cutting = cutting_;
  uint64_t was_since = replay_since_ns_;
  replaying_ = true;
  cutting_ = cut;
  replay_since_ns_ = since;
  for (Event& e : events) dispatch(std::move(e));
  replaying_ = was_replaying;
  cutting_ = was_cutting;
  replay_since_ns_ = was_since;
}

void EventSink::retry_waiting(uint64_t now_ns, bool tables_in) {
  for (uint32_t tgid : waiting_.processes()) {
    bool late = now_ns - waiting_.since_ns(tgid) > kMaxWaitNs;
    if (tables_in || late) release_waiting(tgid, late);
  }
}

void EventSink::release_all_waiting() {
  for (uint32_t tgid : waiting_.processes()) release_waiting(tgid, true);
}

// The instance a sample of `tgid` belongs to; nullopt when filtered out.
std::optional<uint32_t> EventSink::instance_for(const StackEvent& head) {
  bool made;
  uint32_t tgid = head.tgid;
  const std::string& comm = head.comm;
  uint32_t id = processes_.current(tgid, comm, &made);
  if (!made && end_if_replaced(id, head)) id = processes_.current(tgid, comm, &made);
  if (made) {  // first sample: judge it, and read its mappings while it lives
    processes_.set_cgroup(id, head.cgroup);
    processes_.set_start(id, head.ns_tgid, head.start_ns, head.exec_id);
    if (!hooks_.verdicts.accept(tgid, comm, head.cgroup)) {
      processes_.reject(id);
      hooks_.verdicts.reject(tgid);
    } else {
      symbolizer_.refresh(pid_t(tgid), head.mappings);
    }
  }
  if (processes_.instance(id).rejected) return std::nullopt;
  return id;
}

void EventSink::on_stack(StackEvent&& ev) {
  if (!replaying_ && ev.agent.empty()) ++stacks_seen_;  // an agent's stack serves one sample
  auto instance = instance_for(ev);
  if (!instance) return;
  if (stacks_.size() >= max_stacks_) {  // its samples count as dropped for a full table
    if (refused_.size() < kMaxRefused) refused_.insert(ev.id);
    return;
  }
  const pid_t pid = pid_t(ev.tgid);
  symbolizer_.add_mappings(pid, ev.mappings);
  if (runtimes_ && ev.agent.empty())
    runtimes_->read_stack(pid, ev.mappings, ev.runtime_part);  // while it lives
  uint16_t stop = ev.stop;
  // A walk that may wait keeps the event whole to be fed again.
  KnownStack s{*instance, ev.fn, {}, {}, !ev.agent.empty()};
  if (ev.walk)
    s.ips = ev.ips;
  else
    s.ips = std::move(ev.ips);
  if (ev.walk && !s.ips.empty()) {
    // Rare (a table was missing): the newest mappings, unless of another
    // program. A walk begun in process (no mapping sent: a recording without
    // BPF, every walk) reads them again only if it meets code they lack.
    if (!replaying_ && !ev.mappings.empty()) symbolizer_.refresh(pid, ev.mappings);
    int walked = hooks_.unwind.finish_walk(ev.tgid, *ev.walk, ev.walk_stack, s.ips, !cutting_);
    if (walked == UnwindTables::kWalkWaits) {
      if (!replaying_) ++walks_waited_;
      uint64_t id = ev.id;
      hold(ev.tgid, std::move(ev), id, 0);
      return;
    }
    stop = uint16_t(walked);
    walks_cut_waiting_ += walked == AS_STOP_NO_TABLE;
    if (size_t(walked) < kStops) ++walk_stops_[size_t(walked)];
    ++walks_finished_;
  }
  // An agent's frames are the whole stack: a cut one ends in [truncated] after them.
  if (runtimes_ && !ev.agent.empty()) runtimes_->place_agent_frames(pid, ev.agent, ev.runtime_part, s.ips);
  if (stop != AS_STOP_COMPLETE) {
    s.ips.push_back(kTruncatedFrame);
    ++stacks_truncated_;
  }
  if (runtimes_ && ev.agent.empty()) runtimes_->place_frames(pid, ev.mappings, ev.runtime_part, ev.fn, s.ips);
  const ProcessInstance& process = processes_.instance(*instance);
  fold_own_frames(pid, ev.mappings, s.ips);
  s.origin = origin(ev.tgid, process.comm, ev.agent.empty() ? ev.fn : kNoAllocator, s.ips);
  if (per_process_) s.origin.ns_pid = process.shown_ns_pid();
  if (ev.id < one_shot_from_ && !s.one_shot) instance_stacks_[*instance].push_back(ev.id);
  stacks_.insert_or_assign(ev.id, std::move(s));
}

void EventSink::forget_stacks(std::span<const uint32_t> remap) {
  // Several stacks folded into one keep the first one's origin.
  std::vector<StackOrigin> kept(profile_.stacks().size());
  std::vector<bool> placed(kept.size());
  for (size_t i = 0; i < origins_.size() && i < remap.size(); ++i) {
    if (remap[i] == Profile::kGone || placed[remap[i]]) continue;
    placed[remap[i]] = true;
    kept[remap[i]] = std::move(origins_[i]);
  }
  origins_ = std::move(kept);
  // Ended instances without a stack left (the kernel's are erased at the
  // end) give back their ids, mappings and binaries.
  std::vector<bool> held(processes_.slots());
  for (const StackRecord& s : profile_.stacks()) held[s.pid] = true;
  for (const auto& [id, s] : stacks_) held[s.instance] = true;
  processes_.release_ended(held);
  compact_mappings();
}

// The symbolizer keeps the mappings that the stacks still held name, and the
// ids in those stacks' origins follow it.
void EventSink::compact_mappings() {
  std::vector<bool> used;
  auto mark = [&used](uint32_t id) {
    if (id == Symbolizer::kNoMapping) return;
    if (id >= used.size()) used.resize(id + 1);
    used[id] = true;
  };
  auto each_origin = [this](auto&& f) {
    for (StackOrigin& o : origins_) f(o);
    for (auto& [id, s] : stacks_) f(s.origin);
  };
  each_origin([&](StackOrigin& o) {
    for (uint32_t m : o.mappings) mark(m);
    mark(o.allocator_mapping);
  });
  std::vector<uint32_t> remap = symbolizer_.compact(used);
  auto to = [&remap](uint32_t& id) {
    if (id != Symbolizer::kNoMapping) id = remap[id];
  };
  each_origin([&](StackOrigin& o) {
    for (uint32_t& m : o.mappings) to(m);
    to(o.allocator_mapping);
  });
}

// The profile's stack for a kernel stack, made (with its origin) when new.
std::optional<uint32_t> EventSink::profile_stack(const KnownStack& s) {
  size_t before = profile_.stacks().size();
  auto id = profile_.intern(s.instance, s.fn, s.ips);
  note_new_profile_stack(before, s);
  return id;
}

void EventSink::note_new_profile_stack(size_t stacks_before, const KnownStack& s) {
  if (profile_.stacks().size() != stacks_before) origins_.push_back(s.origin);
}

void EventSink::on_alloc(AllocEvent&& e) {
  if (waiting_.must_wait(e.tgid, e.stack, e.addr)) {
    uint32_t tgid = e.tgid;
    uint64_t addr = e.addr;
    hold(tgid, std::move(e), 0, addr);
    return;
  }
  const std::string& comm = e.comm;
  auto it = stacks_.find(e.stack);
  if (it == stacks_.end()) {
    // Never received (a full table, or a stack the kernel could not send),
    // unless its process was filtered out.
    auto current = processes_.find(e.tgid);
    forget_untracked(e.tgid, e.addr, e.flags);
    if (current && processes_.instance(*current).rejected) return;
    bool full = refused_.contains(e.stack);
    (full ? table_full_ : stack_lost_) += 1;
    (full ? table_full_bytes_ : stack_lost_bytes_) += e.size;
    count_drops(e.tgid, comm, false, !full, full);
    return;
  }
  if (processes_.instance(it->second.instance).rejected) {
    forget_untracked(e.tgid, e.addr, e.flags);
    if (e.stack >= one_shot_from_ || it->second.one_shot) stacks_.erase(it);
    return;
  }
  uint64_t offset = e.offset;
  // A weight in place of the offset: the rate must be the session's.
  if ((e.flags & AS_EVF_WEIGHTED) && !weight_fits_rate(e.size, e.offset, profile_.rate())) {
    ++other_rate_;
    forget_untracked(e.tgid, e.addr, e.flags);
    return;
  }
  // No offset said (a weight; Go's runtime, whose countdown has the same law): its mean.
  if (e.flags & (AS_EVF_WEIGHTED | AS_EVF_NO_OFFSET)) offset = expected_offset(e.size, profile_.rate());
  const KnownStack& s = it->second;
  size_t before = profile_.stacks().size();
  ProfileCounters counted = profile_.counters();
  profile_.on_alloc({.pid = s.instance,
                     .fn = s.fn,
                     .addr = e.addr,
                     .size = e.size,
                     .offset = offset,
                     .ts_ns = e.ts_ns,
                     .live_tracked = !(e.flags & (AS_EVF_LIVE_DROPPED | AS_EVF_UNTRACKED | AS_EVF_COLLECTED)),
                     .kernel_held = !(e.flags & AS_EVF_FREE_IN_RING),
                     .ips = s.ips});
  note_new_profile_stack(before, s);
  const ProfileCounters& now = profile_.counters();
  bool table_full = now.stacks_full != counted.stacks_full,
       user_live_full = now.live_full != counted.live_full || now.live_share != counted.live_share;
  if (table_full || user_live_full) forget_untracked(e.tgid, e.addr, e.flags);
  count_drops(e.tgid, comm, (e.flags & AS_EVF_LIVE_DROPPED) || user_live_full, false, table_full);
  if (e.stack >= one_shot_from_ || s.one_shot) stacks_.erase(it);
}

// A sample the kernel tracks live but this side does not (filtered out, or a
// table full): its kernel entry would outlive the process.
void EventSink::forget_untracked(uint32_t tgid, uint64_t addr, uint16_t flags) {
  if (!(flags & (AS_EVF_LIVE_DROPPED | AS_EVF_UNTRACKED | AS_EVF_COLLECTED | AS_EVF_FREE_IN_RING)))
    hooks_.kernel.forget_live(tgid, std::span<const uint64_t>(&addr, 1));
}

StackOrigin EventSink::origin(uint32_t tgid, const std::string& comm, uint16_t fn,
                              std::span<const uint64_t> ips) {
  StackOrigin o;
  o.pid = per_process_ ? tgid : 0;
  o.comm = comm;
  o.mappings = symbolizer_.resolve(pid_t(tgid), ips);
  // An agent's sample (each its own stack) has no allocator in the process's files to look for.
  o.allocator_addr = fn == kNoAllocator ? 0 : hooks_.libraries.allocator_address(tgid, fn);
  if (o.allocator_addr) o.allocator_mapping = symbolizer_.resolve_address(pid_t(tgid), o.allocator_addr);
  return o;
}

// Frames of allocscope's own library. Innermost, they are its allocator
// wrappers (a sample the probes took while an entry was taking the slots):
// the program called them, and they go as allocator frames do. Further out,
// the library's code called what allocated (an entry's attach, run on a
// thread of the program; its JVMTI agent): the bytes are allocscope's, and
// that code and all it called become one frame that says so. Done before
// the stack is resolved: the library is never opened to name frames no
// profile shows (an entry's copy would stay open after its process).
void EventSink::fold_own_frames(pid_t pid, std::span<const Mapping> seen, std::vector<uint64_t>& ips) {
  auto code = [&ips](size_t i) { return !Symbolizer::is_runtime_frame(ips[i]) && ips[i] != kTruncatedFrame; };
  // A return address: the call is before it.
  auto known = [&](size_t i) { return symbolizer_.known_mapping(pid, ips[i] - 1); };
  for (size_t i = 0; i < ips.size(); ++i)
    if (code(i) && !known(i)) {  // mapped since the snapshot (an entry's copy is)
      symbolizer_.refresh(pid, seen);
      break;
    }
  auto own = [&](size_t i) {
    const Mapping* m = code(i) ? known(i) : nullptr;
    return m && is_allocscope_library(m->path);
  };
  size_t n = ips.size(), wrappers = 0, outermost = n;
  while (wrappers < n && own(wrappers)) ++wrappers;
  for (size_t i = wrappers; i < n; ++i)
    if (own(i)) outermost = i;
  if (wrappers == 0 && outermost == n) return;
  size_t cut = outermost < n ? outermost : wrappers < n ? wrappers : n - 1;
  ips.erase(ips.begin(), ips.begin() + ptrdiff_t(cut));
  if (outermost < n || wrappers == n) ips[0] = symbolizer_.runtime_frame("allocscope", "[allocscope]", "", 0);
}

void EventSink::count_drops(uint32_t tgid, const std::string& comm, bool live_full, bool stack_lost,
                            bool table_full) {
  if (!live_full && !stack_lost && !table_full) return;
  constexpr size_t kMaxProcesses = 4096;  // beyond: counted in the totals only
  if (drops_.size() >= kMaxProcesses && !drops_.contains(tgid)) return;
  ProcessDrops& d = drops_[tgid];
  d.comm = comm;
  d.live_full += live_full;
  d.stack_lost += stack_lost;
  d.stack_table_full += table_full;
}

void EventSink::add_exact_delta(const KnownStack& s, const as_exact_totals& now,
                                const as_exact_totals& before) {
  if (now.allocs == before.allocs && now.frees == before.frees) return;
  auto id = profile_stack(s);
  if (!id) return;
  profile_.add_exact(*id, {now.allocs - before.allocs, now.alloc_bytes - before.alloc_bytes,
                           now.frees - before.frees, now.free_bytes - before.free_bytes,
                           lifetimes_of(now, before), as_fn_kind(s.fn) == AS_FN_GO_MALLOC});
}

void EventSink::absorb_exact(std::span<const ExactEntry> totals) {
  for (const auto& [id, now] : totals) {
    auto it = stacks_.find(id);
    if (it == stacks_.end() || processes_.instance(it->second.instance).rejected) continue;
    as_exact_totals& seen = exact_seen_[id];
    add_exact_delta(it->second, now, seen);
    seen = now;
  }
}

// Exact mode: an instance ended. Its last totals are read, and the kernel's
// entries for its stacks go; its blocks leave the live totals unless kept.
void EventSink::finish_exact(uint32_t instance, bool keep_live) {
  auto ids = instance_stacks_.find(instance);
  if (ids == instance_stacks_.end()) return;
  if (!keep_live) {
    std::vector<ExactEntry> totals = hooks_.kernel.exact_totals(ids->second);
    for (const auto& [id, t] : totals) stale_entries_ += t.allocs > t.frees ? t.allocs - t.frees : 0;
    absorb_exact(totals);
    for (uint64_t id : ids->second) {
      if (auto it = stacks_.find(id); it != stacks_.end())
        if (auto stack = profile_stack(it->second)) profile_.release_live(*stack);
      exact_seen_.erase(id);
    }
    hooks_.kernel.forget_exact(ids->second);
  }
}

void EventSink::set_live_times(std::span<const std::pair<as_live_key, as_live_value>> live) {
  std::unordered_map<uint32_t, std::vector<uint64_t>> times;
  for (const auto& [key, value] : live) {
    auto it = stacks_.find(value.stack);
    if (it == stacks_.end()) continue;
    if (auto stack = profile_stack(it->second)) times[*stack].push_back(value.ts_ns);
  }
  profile_.set_live_times(std::move(times));
}

}  // namespace allocscope
