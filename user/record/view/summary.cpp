#include "record/view/summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/units.h"
#include "host/process.h"
#include "model/loss.h"
#include "output/table.h"
#include "output/text_format.h"
#include "probe/features/kernel_features.h"
#include "record/messages.h"
#include "record/scope.h"
#include "record/view/hints.h"
#include "record/view/progress.h"
#include "runtime/registry.h"

namespace allocscope {
namespace {

// The first `names` of `total` things, one an indented line, and how many more.
std::string listed(const std::vector<std::string>& names, uint64_t total) {
  std::string out;
  for (const std::string& n : names) out += "\n  " + n;
  if (total > names.size()) out += "\n  and " + std::to_string(total - names.size()) + " more";
  return out;
}

// Samples the ring buffer lost, but for those of processes the filter then
// rejected: never the recording's.
uint64_t charged_ringbuf_drops(const Counters& k, const RecordingState& s) {
  return k[AS_CNT_RINGBUF_DROPS] - s.rejected_loss.samples;
}

using ull = unsigned long long;

constexpr uint64_t kFeltHoldNs = 100 * 1000000ull;

// The estimates of bytes allocated, and live, over every stack.
double allocated_bytes(const RecordingState& s) {
  double alloc = 0;
  for (const StackRecord& r : s.profile.stacks()) alloc += r.totals.alloc_bytes;
  return alloc;
}
double live_bytes(const RecordingState& s) {
  double live = 0;
  for (const StackRecord& r : s.profile.stacks()) live += r.totals.live_bytes;
  return live;
}

// The drops that happened ("; dropped: ringbuf 3, stack-lost 1"), every
// one when `all` (-v), "" when none and not `all`: the recording's own
// counters, as the JSON names them.
std::string drops_text(const RecordingState& s, bool all) {
  static constexpr std::pair<const char*, const char*> kShown[] = {
      {"dropped_ringbuf", "ringbuf"},
      {"dropped_live_map_full", "live-map-full"},
      {"dropped_stack_lost", "stack-lost"},
      {"dropped_stack_table_full", "stack-table-full"}};
  NamedCounters counters = recording_counters(s);
  std::string text;
  for (auto [counter, shown] : kShown)
    for (const auto& [name, n] : counters)
      if (name == counter && (n || all))
        text += (text.empty() ? "; dropped: " : ", ") + std::string(shown) + " " + std::to_string(n);
  return text;
}

void print_totals(const RecordingState& s, const RecordConfig& config, uint64_t elapsed_ms) {
  double alloc = allocated_bytes(s), live = live_bytes(s);
  Counters k = s.session.counters;
  std::string samples = samples_from(k[AS_CNT_SAMPLES], s.sink.recorded_processes());
  std::fprintf(
      stderr, "allocscope: %.1f s, rate %s, %s, %zu stacks, %s%s allocated, %s live%s\n", elapsed_ms / 1000.0,
      exact_mode(config) ? "1 (exact)" : format_bytes(double(config.rate)).c_str(), samples.c_str(),
      s.profile.stacks().size(),
      exact_mode(config) ? "" : "est. ",  // exact mode counts: nothing is estimated
      format_bytes(alloc).c_str(), format_bytes(live).c_str(), drops_text(s, config.verbose).c_str());
}

void print_kernel_figures(const RecordingState& s) {
  Counters k = s.session.counters;
  std::fprintf(stderr,
               "allocscope: kernel counters: samples=%llu frees=%llu nested=%llu failed_allocs=%llu "
               "returns=%llu filtered=%llu table_requests=%llu frames=%llu row_cache_misses=%llu\n",
               (ull)k[AS_CNT_SAMPLES], (ull)k[AS_CNT_FREES], (ull)k[AS_CNT_NESTED],
               (ull)k[AS_CNT_FAILED_ALLOCS], (ull)k[AS_CNT_RETURNS], (ull)k[AS_CNT_FILTERED],
               (ull)k[AS_CNT_TABLE_REQUESTS], (ull)k[AS_CNT_FRAMES], (ull)k[AS_CNT_ROW_MISSES]);
  const TableStats& t = s.tables.stats();
  std::fprintf(stderr, "allocscope: unwind tables: %llu files, %llu rows (%.1f MiB), built in %.0f ms\n",
               (ull)t.files, (ull)t.rows, t.rows * 8.0 / (1 << 20), t.build_ms);
}

void print_truncation(const RecordingState& s) {
  uint64_t cut = s.sink.stacks_truncated();
  if (!cut) return;
  std::string why;
  for (const auto& [name, n] : recording_counters(s))
    if (name.rfind("truncated_", 0) == 0 && n)
      why += (why.empty() ? "" : ", ") + name.substr(10) + " " + std::to_string(n);
  std::fprintf(
      stderr,
      "allocscope: %llu of %llu distinct stacks cut short ([truncated]); walks that stopped early: %s\n",
      (ull)cut, (ull)s.sink.stacks_seen(), why.c_str());
}

// The processes that lost the most samples, by cause.
void print_process_drops(const RecordingState& s) {
  std::map<uint32_t, ProcessDrops> drops = s.sink.drops();
  std::map<uint32_t, uint64_t> ringbuf;
  for (auto [tgid, n] : s.session.process_drops) {
    ringbuf[tgid] = n;
    ProcessDrops& d = drops[tgid];
    if (d.comm.empty()) {  // lost every sample it sent: named from its instance, or /proc
      auto id = s.sink.processes().latest(tgid);
      d.comm = id ? s.sink.processes().instance(*id).comm : s.sink.last_name(tgid);
      if (d.comm.empty()) d.comm = read_comm(pid_t(tgid));
    }
  }
  std::vector<std::pair<uint64_t, uint32_t>> worst;
  for (const auto& [tgid, d] : drops)
    worst.push_back({d.live_full + d.stack_lost + d.stack_table_full + ringbuf[tgid], tgid});
  std::sort(worst.rbegin(), worst.rend());
  for (size_t i = 0; i < worst.size() && i < 5 && worst[i].first; ++i) {
    const ProcessDrops& d = drops[worst[i].second];
    std::fprintf(stderr,
                 "allocscope:   drops in %s (%u): ringbuf %llu, live-map-full %llu, stack-lost %llu, "
                 "stack-table-full %llu\n",
                 d.comm.empty() ? "?" : d.comm.c_str(), worst[i].second, (ull)ringbuf[worst[i].second],
                 (ull)d.live_full, (ull)d.stack_lost, (ull)d.stack_table_full);
  }
}

// Language runtimes whose frames could not be named, one line each, and why.
static void print_runtime_warnings(const RecordingState& s) {
  if (!s.runtimes) return;
  for (const std::string& w : s.runtimes->warnings(s.session.counters)) print_error(w);
}

void print_warnings(const RecordingState& s, const RecordConfig& config) {
  print_runtime_warnings(s);
  // No sample of a program whose heap a runtime could not read (a Go
  // program before 1.18): its warning says why, another rate would not help.
  uint64_t samples = s.session.counters[AS_CNT_SAMPLES];
  if (std::string hint = few_samples_hint(samples, config.rate, allocated_bytes(s));
      !hint.empty() && !(samples == 0 && s.runtimes && s.runtimes->programs_unread()))
    print_error("note: " + hint);
  Counters k = s.session.counters;
  const ProfileCounters& p = s.profile.counters();
  Recording lost;
  lost.rate = config.rate;
  lost.counters = recording_counters(s);
  if (std::string what = describe_loss(lost, config.metric); !what.empty()) print_error("warning: " + what);
  if (charged_ringbuf_drops(k, s) || k[AS_CNT_FREE_DROPS] > s.ring_frees_lost)
    print_error("warning: the ring buffer overflowed. Raise --ringbuf-size" +
                std::string(exact_mode(config) ? "." : " or --rate."));
  if (s.ring_frees_lost)
    print_error("warning: " + std::to_string(s.ring_frees_lost) +
                " free(s) of sampled blocks were lost in their process's ring (a writer gone in the middle "
                "of a record, or a process that never said which it is): those blocks count as in use");
  if (k[AS_CNT_EXACT_FULL])
    print_error("warning: the per-stack totals were full (exact mode). Raise --max-stacks.");
  if (k[AS_CNT_LIVE_FULL] || p.live_full)
    print_error("warning: the live table was full; inuse estimates are low. Raise --max-live.");
  if (k[AS_CNT_LIVE_SHARE] || p.live_share)
    print_error("warning: " + std::to_string(k[AS_CNT_LIVE_SHARE] + p.live_share) +
                " samples of processes holding their share of the live table were not tracked; inuse "
                "estimates are low. Raise --max-live-per-process (0: no share) or --max-live.");
  if (p.stacks_full || s.sink.table_full())
    print_error("warning: the stack table was full; estimates are low. Raise --max-stacks.");
  if (k[AS_CNT_PROC_DROPS])
    print_error("warning: " + std::to_string(k[AS_CNT_PROC_DROPS]) +
                " process events were lost (ring buffer full); " + std::to_string(s.sink.ended_unseen()) +
                " process(es) whose exit was among them were found gone and ended, and " +
                std::to_string(s.sink.ended_by_stacks()) +
                " program(s) whose exec or exit was among them were ended by the next one's stacks. Raise "
                "--ringbuf-size.");
  if (k[AS_CNT_PROC_TABLE_FULL] + s.verdicts_refused)
    print_error(
        "warning: the process table was full; some children were not followed. Raise --max-processes.");
  if (s.without_allocator) {
    std::string names;
    for (const std::string& n : s.without_allocator_names) names += (names.empty() ? "" : ", ") + n;
    print_error("warning: " + std::to_string(s.without_allocator) +
                " static program(s) ran with no allocator allocscope knows, so nothing of theirs was "
                "recorded (no malloc, mallocx, je_malloc, tc_malloc or mi_malloc symbol: stripped?): " +
                names);
  }
  if (uint64_t n = k[AS_CNT_USDT_RATE] + s.sink.other_rate())
    print_error("warning: " + std::to_string(n) +
                " in-process samples were taken at another rate than --rate and not counted: record with "
                "the rate of the process (its ALLOCSCOPE_RATE), or set it to this one" +
                (exact_mode(config) ? " (exact mode needs ALLOCSCOPE_RATE=1)" : ""));
  // Holds matter to a user when one was long enough to be felt (a stall
  // of another program); -v shows them always.
  if (HoldTimes h = s.session.holds; h.count && (config.verbose || h.max >= kFeltHoldNs))
    print_error(std::to_string(h.count) +
                " process(es) held for a file not seen before (stopped until it was examined): median " +
                format_duration_ns(double(h.p50)) + ", 99th percentile " + format_duration_ns(double(h.p99)) +
                ", longest " + format_duration_ns(double(h.max)) +
                (k[AS_CNT_HOLD_RELAYS] ? "; " + std::to_string(k[AS_CNT_HOLD_RELAYS]) +
                                             " parent(s) that stop with their child (su, sudo) held and "
                                             "continued with it"
                                       : ""));
  if (uint64_t n = k[AS_CNT_HOLD_REFUSED])
    print_error("warning: " + std::to_string(n) +
                " process(es) mapping a new file ran on unheld (the table of held processes was full), or "
                "mapped a file the kernel could not name (their memory map was busy; perhaps a file examined "
                "before): their first allocations through it may be missing");
  if (s.held_too_long)
    print_error("warning: " + std::to_string(s.held_too_long) +
                " process(es) held for a new file ran on before it was examined (the wait passed its bound): "
                "their first allocations through it may be missing:" +
                listed(s.held_too_long_names, s.held_too_long));
  if (s.libraries_missed)
    print_error("warning: " + std::to_string(s.libraries_missed) +
                " newly mapped file(s) could not be examined or probed (their allocations, if any, are "
                "missing):" +
                listed(s.missed_names, s.libraries_missed));
}

}  // namespace

SourceFigures figures_of(const BpfSession& session) {
  return {session.counters(), session.processes().drops(), hold_figures(session.hold_times()),
          session.paths(), session.kernel().trap_ns};
}

HoldTimes hold_figures(const RecentDurations& holds) {
  return {holds.count(), holds.quantile(0.5), holds.quantile(0.99), holds.max()};
}

NamedCounters recording_counters(const RecordingState& s) {
  Counters k = s.session.counters;
  const ProfileCounters& p = s.profile.counters();
  const TableStats& t = s.tables.stats();
  auto stop = [&](as_stop why) { return k[size_t(AS_CNT_STOP_FIRST) + size_t(why)]; };
  NamedCounters c = {
      {"samples", k[AS_CNT_SAMPLES]},
      {"frees_seen", k[AS_CNT_FREES]},
      {"probe_traps", k[AS_CNT_TRAPS]},
      {"processes", s.sink.recorded_processes()},
      // Not what the filter rejected: that was never the recording's.
      {"dropped_ringbuf", charged_ringbuf_drops(k, s)},
      {"dropped_ringbuf_bytes", k[AS_CNT_DROPPED_BYTES] - s.rejected_loss.bytes},
      {"dropped_filtered_out", s.rejected_loss.samples},
      {"dropped_frees", k[AS_CNT_FREE_DROPS]},
      {"dropped_frees_bytes", k[AS_CNT_FREE_DROPS_BYTES]},
      {"frees_unmatched", p.unmatched_frees},
      {"live_replaced", p.replaced_live},
      {"dropped_live_map_full", k[AS_CNT_LIVE_FULL] + k[AS_CNT_LIVE_SHARE] + p.live_full + p.live_share},
      {"dropped_live_map_full_bytes",
       k[AS_CNT_LIVE_FULL_BYTES] + k[AS_CNT_LIVE_SHARE_BYTES] + p.live_full_bytes + p.live_share_bytes},
      // Of those, what a process's share (--max-live-per-process) refused.
      {"dropped_live_share", k[AS_CNT_LIVE_SHARE] + p.live_share},
      {"dropped_live_share_bytes", k[AS_CNT_LIVE_SHARE_BYTES] + p.live_share_bytes},
      {"dropped_stack_lost", s.sink.stack_lost()},
      {"dropped_stack_lost_bytes", s.sink.stack_lost_bytes()},
      {"dropped_stack_table_full", p.stacks_full + s.sink.table_full()},
      {"dropped_stack_table_full_bytes", p.stacks_full_bytes + s.sink.table_full_bytes()},
      {"dropped_exact_full", k[AS_CNT_EXACT_FULL]},
      {"dropped_exact_full_bytes", k[AS_CNT_EXACT_FULL_BYTES]},
      {"dropped_process_events", k[AS_CNT_PROC_DROPS]},
      {"ended_processes_found_gone", s.sink.ended_unseen()},
      {"ended_programs_found_replaced", s.sink.ended_by_stacks()},
      {"entries_marked_by_library", k[AS_CNT_ENTRIES_MARKED]},
      {"entry_samples_frees_unseen", s.sink.entry_frees_unseen()},
      {"children_not_followed", k[AS_CNT_PROC_TABLE_FULL] + s.verdicts_refused},
      {"libraries_not_probed", s.libraries_missed},
      {"processes_held", k[AS_CNT_HOLDS]},
      {"holds_refused", k[AS_CNT_HOLD_REFUSED]},
      {"hold_relays", k[AS_CNT_HOLD_RELAYS]},
      {"held_too_long", s.held_too_long},
      {"exact_live_swept", s.live_swept},
      {"dropped_other_rate", k[AS_CNT_USDT_RATE] + s.sink.other_rate()},
      {"stacks_unwound", s.sink.stacks_seen()},
      {"stacks_truncated", s.sink.stacks_truncated()},
      {"walks_finished_in_userspace", s.sink.walks_finished()},
      {"walks_waited_for_a_table", s.sink.walks_waited()},
      {"walks_not_deferred", k[AS_CNT_NOT_DEFERRED]},
      {"truncated_table_still_building", s.sink.walks_cut_waiting()},
      {"truncated_no_unwind_info", stop(AS_STOP_NO_INFO)},
      {"truncated_table_not_loaded", stop(AS_STOP_NO_TABLE)},
      {"truncated_bad_frame", stop(AS_STOP_BAD_FRAME)},
      {"truncated_unreadable_stack", stop(AS_STOP_READ)},
      {"truncated_bad_return_address", stop(AS_STOP_BAD_IP)},
      {"truncated_depth", stop(AS_STOP_DEPTH)},
      {"truncated_mmap_lock_busy", stop(AS_STOP_VMA_BUSY)},
      {"truncated_too_many_mappings", stop(AS_STOP_VMAS)},
      {"unwind_tables", t.files},
      {"unwind_table_rows", t.rows},
      {"unwind_tables_failed", t.failed + t.full},
      {"cgroups_unnamed", k[AS_CNT_CGROUP_DROPS]}};
  if (s.runtimes) s.runtimes->add_counters(k, c);
  return c;
}

ProgressFigures progress_figures(const RecordingState& s, double elapsed_s) {
  Counters k = s.session.counters;
  const ProfileCounters& p = s.profile.counters();
  return {elapsed_s, s.sink.recorded_processes(), k[AS_CNT_SAMPLES],
          charged_ringbuf_drops(k, s) + k[AS_CNT_LIVE_FULL] + k[AS_CNT_LIVE_SHARE] + p.live_full +
              p.live_share + s.sink.stack_lost() + p.stacks_full + k[AS_CNT_EXACT_FULL] +
              s.sink.table_full()};
}

void print_live_peaks(const RecordingState& s, const RecordConfig& config, uint64_t start_ms,
                      uint64_t snapshots, uint64_t missed) {
  auto since_start = [&](uint64_t ns) {
    return ns / 1000000 > start_ms ? (ns / 1000000 - start_ms) / 1000.0 : 0.0;
  };
  const PeakKeeper& peak = s.profile.peak();
  if (config.peak && peak.seen()) {
    std::fprintf(stderr, "allocscope: peak: %s%s live at %.1f s%s\n", exact_mode(config) ? "" : "est. ",
                 format_bytes(peak.bytes()).c_str(), since_start(peak.ts_ns()),
                 config.outputs.empty() ? "" : " (its in-use profile: the .peak outputs)");
    // Several processes: each one's own high point (they need not coincide).
    std::vector<std::pair<double, uint32_t>> highs;
    for (const auto& [instance, p] : s.profile.process_peaks())
      if (p.peak > 0) highs.push_back({p.peak, instance});
    std::sort(highs.rbegin(), highs.rend());
    if (highs.size() > 1) {
      std::string line;
      for (size_t i = 0; i < highs.size() && i < 5; ++i) {
        const ProcessInstance& pi = s.sink.processes().instance(highs[i].second);
        char part[160];
        std::snprintf(part, sizeof part, "%s%s (%u) %s at %.1f s", i ? ", " : "", pi.comm.c_str(), pi.tgid,
                      format_bytes(highs[i].first).c_str(),
                      since_start(s.profile.process_peaks().at(highs[i].second).peak_ns));
        line += part;
      }
      std::fprintf(stderr, "allocscope: peaks by process: %s%s\n", line.c_str(),
                   highs.size() > 5 ? (", and " + std::to_string(highs.size() - 5) + " more").c_str() : "");
    }
  }
  if (config.snapshot_above)
    std::fprintf(
        stderr, "allocscope: --snapshot-above %s: %llu snapshot%s written%s\n",
        format_bytes(double(config.snapshot_above)).c_str(), (ull)snapshots, snapshots == 1 ? "" : "s",
        missed ? (", " + std::to_string(missed) + " more crossings past --max-snapshots").c_str() : "");
}

// How the kernel recorded: which probes, which unwinder, which fallbacks.
static void print_kernel_paths(const RecordingState& s) {
  std::string line;
  for (const auto& [name, value] : s.session.paths)
    line += (line.empty() ? "" : ", ") + name + (name == "kernel" ? " " : ": ") + value;
  if (!s.sampling.empty()) line += ", sampling: " + s.sampling;
  // A runtime's heap (Go's) is read by probes whatever the C allocations' path.
  if (s.sampling.starts_with("in process") && s.runtimes)
    for (const std::string& heap : s.runtimes->probed_heaps()) line += ", " + heap + ": probes";
  std::fprintf(stderr, "allocscope: %s\n", line.c_str());
}

// The kernel's paths with -v; what each runtime's heap was read by always
// (where Java's or Python's frames came from, or why not).
static void print_paths(const RecordingState& s, bool verbose) {
  if (verbose) print_kernel_paths(s);
  if (s.runtimes)
    for (const RuntimePath& p : s.runtimes->paths())
      if (!p.shown.empty()) std::fprintf(stderr, "allocscope: %s: %s\n", p.shown.c_str(), p.value.c_str());
}

void print_summary(const RecordingState& s, const RecordConfig& config, uint64_t elapsed_ms) {
  print_totals(s, config, elapsed_ms);
  print_paths(s, config.verbose);
  uint64_t traps = s.session.counters[AS_CNT_TRAPS];
  if (config.verbose || trap_cost_matters(traps, s.session.trap_ns, elapsed_ms * 1'000'000))
    if (std::string cost = trap_cost_line(traps, s.session.trap_ns); !cost.empty())
      std::fprintf(stderr, "allocscope: %s\n", cost.c_str());
  if (config.verbose) print_kernel_figures(s);
  print_truncation(s);
  print_process_drops(s);
  print_warnings(s, config);
}

}  // namespace allocscope
