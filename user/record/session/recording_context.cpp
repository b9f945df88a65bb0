// The figures every job of a recording reads: its state, counters and meta.
#include "record/session/recording_context.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

#include "abi/preload/trial_record.h"
#include "base/clocks.h"
#include "host/process.h"
#include "record/messages.h"
#include "record/scope.h"

namespace allocscope {

// A ring per process, of frees (40 bytes each) read every poll: a megabyte
// holds some 26,000. Never above what --ringbuf-bytes allows the kernel's.
Result<void> RecordingContext::open_free_channel() {
  constexpr uint64_t kDefault = 1 << 20, kLeast = 64 << 10;
  uint64_t bytes = std::max(kLeast, std::bit_floor(std::min<uint64_t>(kDefault, config.ringbuf_bytes)));
  auto channel = AnsweredChannel::open(bytes, PreloadChannel::Use::FreesOnly);
  if (!channel) return fail(channel.error());
  free_channel = std::move(*channel);
  return {};
}

// Every free written before `now` is read, but for the rings read short of
// their end: there, every record after the first unread one is later than
// its stamp. A writer stuck in a record (stopped by a signal, preempted
// long) holds the time back at most kMaxHoldBackNs: then its ring's later
// frees may come after an allocation at their address (live_replaced).
// A name read once a pass: a JVM sends thousands of samples a second.
const std::string& RecordingContext::agent_comm(uint32_t tgid) {
  auto it = agent_comms_.find(tgid);
  if (it == agent_comms_.end()) it = agent_comms_.emplace(tgid, read_comm(pid_t(tgid))).first;
  return it->second;
}

uint64_t RecordingContext::read_ring_frees(uint64_t now) {
  agent_comms_.clear();  // names are read again each pass (an exec renames)
  constexpr uint64_t kMaxHoldBackNs = 100'000'000;
  uint64_t read_to = now;
  auto stamp_of = [](std::span<const uint8_t> record) {
    as_trial_free f{};
    if (record.size() >= sizeof f) std::memcpy(&f, record.data(), sizeof f);
    return f;
  };
  free_channel->drain(
      [&](const PreloadChannel::RingId&, uint32_t tgid, std::span<const uint8_t> record) {
        as_trial_free f = stamp_of(record);
        if (f.kind == AS_TRIAL_FREE)
          ring_frees.add(tgid, f.tid, f.addr, f.ts_ns, to_sink);
        else  // an agent's object goes before its free, which is later in the same ring
          agent_records.translate(tgid, agent_comm(tgid), record, to_sink);
      },
      SIZE_MAX,
      [&](const PreloadChannel::RingId&, uint32_t, std::span<const uint8_t> record) {
        read_to = std::min(read_to, std::max(stamp_of(record).ts_ns, now - kMaxHoldBackNs));
      });
  return read_to;
}

bool RecordingContext::take_event(Event event) {
  // An event later than the rings' read stops the pass: the frees before
  // it may not have been read yet.
  if (free_channel && !ring_frees.before(event, to_sink)) return false;
  return parts->sink.take(std::move(event));
}

Result<int> RecordingContext::deliver_events(int timeout_ms, bool last) {
  BpfSession& s = *parts->session;
  // An event kept by the last pass may be the one that woke the loop (a
  // held process's): the next pass comes at once, not at the next wakeup.
  constexpr int kKeptWaitMs = 2;
  if (auto ok = s.wait(ring_frees.has_kept() ? std::min(timeout_ms, kKeptWaitMs) : timeout_ms); !ok)
    return fail(ok.error());
  // The time, then the rings (the frees written before it are read), then
  // where the ring buffer's events end: the allocations of those frees are
  // before it.
  uint64_t placed = 0;
  if (free_channel) {
    uint64_t read_to = read_ring_frees(monotonic_ns());
    placed = s.events_placed();
    ring_frees.pass_begins(last ? UINT64_MAX : read_to);
    if (std::optional<Event> kept = ring_frees.take_kept()) {
      take_event(std::move(*kept));
      if (ring_frees.has_kept()) return 0;  // still too late: the events after it wait behind it
    }
  }
  auto got = s.deliver();
  if (!got) return fail(got.error());
  if (free_channel) {
    // A pass ends early at an event still being written too (libbpf stops there).
    bool complete = !got->stopped && s.events_read() >= placed;
    ring_frees.pass_ends(complete, to_sink);
    free_channel->release_finished(now_ms());
  }
  return got->events;
}

Result<void> RecordingContext::catch_up(uint64_t max_wait_ms) {
  BpfSession& s = *parts->session;
  uint64_t placed = s.events_placed();
  parts->sink.yield_at(UINT64_MAX);  // the loop sets its deadline again at its next pass
  uint64_t until = now_ms() + max_wait_ms;
  while (s.events_read() < placed || ring_frees.has_kept()) {
    auto n = deliver_events(0);
    if (!n) return fail(n.error());
    if (now_ms() >= until) break;  // a backlog read takes what it takes; waits end here
    if (*n == 0) usleep(1000);
  }
  return {};
}

void RecordingContext::flush_ring_frees() {
  if (!free_channel) return;
  read_ring_frees(monotonic_ns());
  ring_frees.flush(to_sink);
  // No more rings: a program the command runs from now on frees through
  // the probe, which is gone, and no ring of it fills unread.
  free_channel_counts = free_channel->counts();
  free_channel.reset();
}

std::optional<PreloadChannel::Counts> RecordingContext::ring_counts() const {
  if (free_channel) return free_channel->counts();
  return free_channel_counts;
}

std::string RecordingContext::sampling() const {
  if (!parts) return "";
  if (config.command.empty() && injects(config))
    return describe_entries(parts->injections.entered(), parts->injections.refusals());
  if (config.command.empty() && enters_busy(config))
    return describe_busy_entries(parts->injections.entered(), parts->injections.refusals());
  if (config.command.empty()) return "";
  // Those still running at the end (a launched command that outlives -d)
  // count as the kernel's map marks them.
  const ProcessTable& table = parts->sink.processes();
  uint64_t in_process = table.ended_in_process(), through_probes = table.ended_through_probes();
  for (auto [tgid, id] : table.running_instances())
    if (!table.instance(id).rejected)
      ++(parts->session->processes().in_process(tgid) ? in_process : through_probes);
  return describe_sampling(plan, in_process, through_probes);
}

// Frees the rings lost: a full ring, a writer gone in the middle, a process
// that never said which it is.
static uint64_t ring_frees_lost(const PreloadChannel::Counts& c) { return c.lost + c.abandoned + c.unplaced; }

// The rings' frees are the kernel's kind of figure: frees seen, and lost
// (a full ring, a writer gone in the middle) as the ring buffer's are.
static SourceFigures with_ring_frees(SourceFigures f, const std::optional<PreloadChannel::Counts>& rings,
                                     const RingFrees& frees, const AgentRecords& agents) {
  if (!rings) return f;
  f.counters[AS_CNT_SAMPLES] += agents.java_samples();  // the JVM's, through the rings
  f.counters[AS_CNT_USDT_RATE] += agents.other_rate();
  const PreloadChannel::Counts& c = *rings;
  f.counters[AS_CNT_FREES] += frees.counts().read;
  f.counters[AS_CNT_FREE_DROPS] += ring_frees_lost(c);
  return f;
}

RecordingState RecordingContext::state() const {
  const LibraryDiscovery& l = parts->libraries;
  RecordingState st{with_ring_frees(figures_of(*parts->session), ring_counts(), ring_frees, agent_records),
                    profile,
                    parts->sink,
                    parts->tables,
                    l.libraries_missed(),
                    parts->verdicts.verdicts_refused(),
                    l.without_allocator(),
                    l.without_allocator_names(),
                    l.missed_names(),
                    tallies.held_too_long,
                    tallies.held_too_long_names,
                    tallies.live_swept,
                    parts->verdicts.rejected_loss(),
                    sampling(),
                    &parts->runtimes};
  if (auto rings = ring_counts()) st.ring_frees_lost = ring_frees_lost(*rings);
  return st;
}

RuntimeSettings runtime_settings(const RecordConfig& c) {
  RuntimeSettings s;
  s.rate = c.rate;
  s.system_wide = system_wide(c);
  s.writes_processes = c.inject && !c.all && (!c.pids.empty() || !c.command.empty());
  if (c.no_go_heap) s.off.insert("go");
  if (c.no_java_heap) s.off.insert("jvm");
  if (c.go_heap_calls) s.by_calls.insert("go");
  return s;
}

void RecordingContext::sweep_stale_live() {
  if (!exact_mode(config) || parts->sink.stale_live_entries() == 0) return;
  if (auto swept = parts->session->live().sweep(); swept)
    tallies.live_swept += *swept;
  else
    print_error(swept.error());
  parts->sink.swept();
}

void RecordingContext::absorb_exact(bool with_ages) {
  if (!exact_mode(config)) return;
  parts->sink.absorb_exact(parts->session->live().exact_totals());
  profile.settle_peak(monotonic_ns());
  if (with_ages && !config.no_free) {
    sweep_stale_live();  // their ages are no live block's, and the read copies fewer
    parts->sink.set_live_times(parts->session->live().entries());
  }
}

NamedCounters RecordingContext::counters() {
  NamedCounters c = recording_counters(state());
  c.emplace_back("cgroups_forgotten", cgroup_names.forgotten());
  c.emplace_back("debug_files_refused", Symbolizer::debug_files_refused());
  if (folds.size()) c.emplace_back("fold_journal_dropped", folds.journal_dropped());
  if (auto rings = ring_counts()) {
    const PreloadChannel::Counts& k = *rings;
    c.emplace_back("ring_frees", ring_frees.counts().read);
    c.emplace_back("ring_frees_early", ring_frees.counts().early);
    c.emplace_back("rings_refused", k.refused);  // their processes' frees trap, as before
    c.emplace_back("rings_other_clock", k.other_clock);
  }
  if (config.duty_period_ms) {
    c.emplace_back("duty_windows", tallies.duty_windows + 1);  // the first window began attached
    c.emplace_back("duty_probes_paused", parts->session->paused());
    c.emplace_back("duty_probes_lost", tallies.duty_lost);
  }
  return c;
}

RecordingMeta RecordingContext::meta(uint64_t duration_ms) {
  auto paths = parts->session->paths();
  if (std::string how = sampling(); !how.empty()) paths.emplace_back("sampling", how);
  for (RuntimePath& p : parts->runtimes.paths()) paths.emplace_back(std::move(p.key), std::move(p.value));
  if (config.no_free) paths.emplace_back("frees", kFreesNotProbed);
  if (targets_ended) paths.emplace_back("taken", kTakenAfterExit);
  NamedCounters c = counters();
  c.emplace_back("recording_id", recording_id);
  return {config.rate,    start_wall_ns,   int64_t(duration_ms) * 1000000, config.metric, std::move(c),
          monotonic_ns(), std::move(paths)};
}

}  // namespace allocscope
