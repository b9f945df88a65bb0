#include "recorder.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <regex>
#include <unordered_map>
#include <unordered_set>

#include "allocator_probes.h"
#include "loss.h"
#include "pprof.h"
#include "process.h"
#include "progress.h"
#include "recording_builder.h"
#include "symbolizer.h"
#include "table_loader.h"
#include "target.h"
#include "units.h"

namespace allocscope {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: interrupt the poll
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

uint64_t monotonic_ns() {  // the clock of bpf_ktime_get_ns
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

int64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void error(const std::string& message) { std::fprintf(stderr, "allocscope: %s\n", message.c_str()); }

void print_placement(const std::string& path, const std::vector<ProbeTarget>& targets, ProbeMode mode) {
  std::fprintf(stderr, "allocscope: %s probes in %s:\n", probe_mode_name(mode), path.c_str());
  for (const ProbeTarget& t : targets)
    std::fprintf(stderr, "  %-15s +%-3llu %-24s %s\n", fn_name(t.fn), (unsigned long long)t.placed_at,
                 t.instruction.c_str(), t.emulated ? "emulated" : "single-stepped");
}

using FileKey = std::pair<uint64_t, uint64_t>;  // device, inode

FileKey file_key(const Mapping& m) { return {(uint64_t(m.dev_major) << 32) | m.dev_minor, m.inode}; }

// The kernel's encoding of a device number (major << 20 | minor).
FileKey file_key(uint32_t kernel_dev, uint64_t ino) {
  return {(uint64_t(kernel_dev >> 20) << 32) | (kernel_dev & 0xfffff), ino};
}

// A C library mapped by a process that announced it (AS_EV_MMAP) before
// /proc showed the mapping: looked for again until the deadline.
struct PendingLibrary {
  uint32_t tgid;
  uint64_t addr;        // where it was mapped; 0: any mapping of `key`
  FileKey key;          // the file as the kernel's vma names it (overlayfs: the backing file)
  uint32_t kernel_dev;  // ... in the kernel's encoding, to report it again if it is given up
  uint64_t deadline_ms;
  uint64_t mapped_ns;   // when the process mapped it (CLOCK_MONOTONIC)
};

class Recorder {
 public:
  explicit Recorder(const RecordConfig& c);
  int run();

 private:
  bool children() const { return config_.children.value_or(!config_.command.empty()); }
  // System-wide probes, one set per C library file, with the kernel's
  // process table deciding who is traced; else probes per process.
  bool system_wide() const { return config_.all || children(); }
  // Whether only the kernel table's members are traced (-p, -- CMD, --all -p),
  // rather than every process not ignored (--all).
  bool members_only() const { return !config_.all || !config_.pids.empty(); }
  SinkPolicy policy();
  Result<void> open_session();
  Result<std::vector<Target>> make_targets();
  Result<void> attach_library(pid_t pid, const Mapping& libc);
  Result<void> attach_process(pid_t pid);
  Result<void> attach_every_process();
  void find_pending_libraries(uint64_t now);
  uint64_t allocator_address(uint32_t tgid, int fn);
  std::vector<std::pair<std::string, uint64_t>> counters() const;
  ProgressFigures progress_figures(double elapsed_s) const;
  Recording snapshot(uint64_t duration_ms) const;
  Result<void> write(unsigned number, uint64_t duration_ms);
  void print_summary(uint64_t elapsed_ms) const;
  void print_process_drops() const;
  void prepare_tables(const std::vector<Target>& targets);
  void sweep_exact_live(uint64_t now);
  bool exact() const { return config_.rate <= 1; }

  const RecordConfig& config_;
  Profile profile_;
  mutable Symbolizer symbolizer_;
  std::optional<std::regex> comm_filter_;
  std::unordered_set<uint32_t> roots_;  // -p and -- CMD processes
  EventSink sink_;
  std::unique_ptr<BpfSession> session_;
  std::unique_ptr<TableLoader> tables_;
  uint64_t last_sweep_ms_ = 0;
  std::map<FileKey, std::array<uint64_t, AS_FN_COUNT>> allocator_offsets_;  // entry file offsets per library
  std::vector<PendingLibrary> pending_;
  uint64_t libraries_missed_ = 0;
  int64_t start_wall_ns_ = 0;
};

Recorder::Recorder(const RecordConfig& c)
    : config_(c),
      profile_(c.rate, c.max_stacks, c.max_live),
      sink_(profile_, symbolizer_, policy(), c.max_stacks) {
  if (!c.comm.empty())
    comm_filter_.emplace(c.comm, std::regex::extended | std::regex::nosubs);
}

SinkPolicy Recorder::policy() {
  SinkPolicy p;
  p.per_process = config_.per_process;
  p.accept = [this](uint32_t, const std::string& comm) {
    return !comm_filter_ || std::regex_search(comm, *comm_filter_);
  };
  p.reject = [this](uint32_t tgid) {
    // Spares it the sampled path; a followed process stays followed, to be
    // judged again when it runs another program.
    if (system_wide() && !roots_.contains(tgid))
      (void)session_->set_verdict(tgid, members_only() ? AS_PROC_MEMBER_IGNORED : AS_PROC_IGNORED);
  };
  p.keeps_live_at_exit = [this](uint32_t tgid) { return roots_.contains(tgid); };
  p.forget_live = [this](uint32_t tgid, std::span<const uint64_t> addrs) { session_->forget_live(tgid, addrs); };
  p.new_library = [this](const as_proc_event& e) {
    pending_.push_back({e.tgid, e.addr, file_key(e.dev, e.ino), e.dev, now_ms() + 1000, e.ts_ns});
    find_pending_libraries(now_ms());
  };
  p.on_exec = [this](uint32_t tgid) {
    // A C library the kernel mapped itself (musl's, as the interpreter) shows
    // no mmap: look in the new program's mappings.
    if (system_wide())
      if (const Mapping* libc = find_c_library(symbolizer_.maps(pid_t(tgid))))
        if (!allocator_offsets_.contains(file_key(*libc)))
          pending_.push_back({tgid, libc->start, file_key(*libc), 0, now_ms() + 1000, monotonic_ns()});
  };
  p.unreject = [this](uint32_t tgid, bool exited) {
    // The verdict was written for the program that was sampled; the process
    // has since run another or exited, so whatever the kernel did at that
    // moment is done again here, after the write.
    if (!system_wide() || roots_.contains(tgid))
      return;
    (void)session_->set_verdict(tgid, exited || !members_only() ? 0 : AS_PROC_MEMBER);
  };
  p.allocator_address = [this](uint32_t tgid, int fn) { return allocator_address(tgid, fn); };
  p.need_table = [this](uint32_t tgid, const as_vma& vma) { tables_->on_request(pid_t(tgid), vma); };
  p.finish_walk = [this](uint32_t tgid, const as_deferred_walk& w, std::span<const uint8_t> stack,
                         std::vector<uint64_t>& ips) {
    symbolizer_.refresh(pid_t(tgid));  // rare (a table was missing): the newest mappings
    ProcessRows rows(*tables_, pid_t(tgid), symbolizer_.maps(pid_t(tgid)));
    StackCopy mem(w.sp, stack);
    return continue_walk({w.ip, w.sp, w.bp, w.bp_lost, 0}, w.stack_end, rows, mem, ips);
  };
  p.exact_totals = [this](std::span<const uint64_t> ids) { return session_->exact_totals(ids); };
  p.forget_exact = [this](std::span<const uint64_t> ids) { session_->forget_exact(ids); };
  return p;
}

Result<void> Recorder::open_session() {
  SessionConfig sc{.rate = config_.rate,
                   .max_live = config_.max_live,
                   .ringbuf_bytes = config_.ringbuf_bytes,
                   .mode = config_.probe_mode,
                   .null_probes = config_.null_probes,
                   .no_free = config_.no_free,
                   .unwind_tables = config_.unwind == UnwindMode::Dwarf,
                   .max_stacks = config_.max_stacks,
                   .verbose = config_.verbose,
                   .filter_processes = system_wide(),
                   .trace_unknown = !members_only(),
                   .follow_children = children(),
                   .max_processes = config_.max_processes};
  if (!config_.cgroup.empty()) {
    auto cg = find_cgroup(config_.cgroup);
    if (!cg)
      return fail(cg.error());
    sc.cgroup_id = cg->id;
    sc.cgroup_level = cg->level;
  }
  auto session = BpfSession::open(sc, std::ref(sink_));
  if (!session)
    return fail(session.error());
  session_ = std::move(*session);
  tables_ = std::make_unique<TableLoader>(*session_, config_.max_unwind_rows, config_.verbose);
  // allocscope's own allocations are never sampled (system-wide probes see them).
  return session_->set_verdict(uint32_t(getpid()), AS_PROC_IGNORED);
}

Result<std::vector<Target>> Recorder::make_targets() {
  std::vector<Target> targets;
  if (!config_.command.empty()) {
    auto t = Target::launch(config_.command);
    if (!t)
      return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (pid_t pid : config_.pids) {
    auto t = Target::attach(pid);
    if (!t)
      return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (Target& t : targets) {
    roots_.insert(uint32_t(t.pid()));
    if (auto ok = session_->set_verdict(uint32_t(t.pid()), AS_PROC_MEMBER); !ok)
      return fail(ok.error());
  }
  // Children forked before recording began: followed too (new ones are
  // marked by the kernel at fork).
  if (children() && !config_.pids.empty())
    for (pid_t child : descendants_of(config_.pids))
      if (auto ok = session_->set_verdict(uint32_t(child), AS_PROC_MEMBER); !ok)
        return fail(ok.error());
  return targets;
}

// Probes the C library `libc` of process `pid`: in that process alone, or
// (system-wide) in every process, once per file.
Result<void> Recorder::attach_library(pid_t pid, const Mapping& libc) {
  FileKey key = file_key(libc);
  if (system_wide() && allocator_offsets_.contains(key))
    return {};
  std::string path = mapped_file_path(pid, libc);
  auto targets = find_allocator_probes(path, config_.naive_placement);
  if (!targets)
    return fail(targets.error());
  if (config_.verbose)
    print_placement(libc.path, *targets, session_->mode());
  if (auto ok = session_->attach(system_wide() ? 0 : pid, path, *targets); !ok)
    return ok;
  std::array<uint64_t, AS_FN_COUNT> entries{};
  for (const ProbeTarget& t : *targets)
    entries[t.fn] = t.offset - t.placed_at;
  allocator_offsets_[key] = entries;
  return {};
}

Result<void> Recorder::attach_process(pid_t pid) {
  auto maps = read_maps(pid);
  if (!maps) {
    if (!process_exists(pid))
      return fail("process " + std::to_string(pid) + " exited during attach");
    return fail(maps.error());
  }
  const Mapping* libc = find_c_library(*maps);
  if (!libc)
    return fail("process " + std::to_string(pid) + " (" + read_comm(pid) +
                ") maps no C library: statically linked, or not using a C library allocator");
  return attach_library(pid, *libc);
}

// --all: every distinct C library file that a running process maps
// (containers and chroots bring their own); later ones come as mmap events.
Result<void> Recorder::attach_every_process() {
  for (pid_t pid : list_processes()) {
    if (pid == getpid())
      continue;
    auto maps = read_maps(pid);  // kernel threads and the just exited have none
    const Mapping* libc = maps ? find_c_library(*maps) : nullptr;
    if (!libc || allocator_offsets_.contains(file_key(*libc)))
      continue;
    if (auto ok = attach_library(pid, *libc); !ok) {
      ++libraries_missed_;
      error("warning: " + ok.error());
    }
  }
  if (allocator_offsets_.empty())
    return fail("no C library could be probed (see the warnings above)");
  return {};
}

void Recorder::find_pending_libraries(uint64_t now) {
  std::erase_if(pending_, [&](const PendingLibrary& p) {
    if (allocator_offsets_.contains(p.key))
      return true;
    auto maps = read_maps(pid_t(p.tgid));
    if (maps)
      for (const Mapping& m : *maps)
        // By address: /proc names an overlayfs file by the overlay's inode,
        // the kernel's vma by the backing file's.
        if (m.executable && (p.addr ? m.start <= p.addr && p.addr < m.end : file_key(m) == p.key)) {
          if (allocator_offsets_.contains(file_key(m)))
            return true;
          if (auto ok = attach_library(pid_t(p.tgid), m); !ok) {
            ++libraries_missed_;
            if (p.kernel_dev)
              session_->forget_file(p.kernel_dev, p.key.second);
            error("warning: " + ok.error());
          } else if (config_.verbose) {  // the gap: its allocations before now were not seen
            std::fprintf(stderr, "allocscope: probing %s, a new C library (process %u), %.1f ms after it was mapped\n",
                         m.path.c_str(), p.tgid, (monotonic_ns() - p.mapped_ns) / 1e6);
          }
          return true;
        }
    if (maps && now < p.deadline_ms)
      return false;  // not mapped yet: the loader is on it
    ++libraries_missed_;  // gone before we could read where: the next process to map it tells again
    if (p.kernel_dev)
      session_->forget_file(p.kernel_dev, p.key.second);
    return true;
  });
}

uint64_t Recorder::allocator_address(uint32_t tgid, int fn) {
  for (const Mapping& m : symbolizer_.maps(pid_t(tgid))) {
    auto lib = allocator_offsets_.find(file_key(m));
    if (!m.executable || lib == allocator_offsets_.end())
      continue;
    uint64_t off = lib->second[fn];
    if (off && off >= m.offset && off < m.offset + (m.end - m.start))
      return m.start + (off - m.offset);
  }
  return 0;
}

std::vector<std::pair<std::string, uint64_t>> Recorder::counters() const {
  Counters k = session_->counters();
  const ProfileCounters& p = profile_.counters();
  const TableStats& t = tables_->stats();
  auto stop = [&](as_stop why) { return k[size_t(AS_CNT_STOP_FIRST) + size_t(why)]; };
  return {{"samples", k[AS_CNT_SAMPLES]},
          {"frees_seen", k[AS_CNT_FREES]},
          {"processes", sink_.recorded_processes()},
          {"dropped_ringbuf", k[AS_CNT_RINGBUF_DROPS]},
          {"dropped_ringbuf_bytes", k[AS_CNT_DROPPED_BYTES]},
          {"dropped_frees", k[AS_CNT_FREE_DROPS]},
          {"dropped_frees_bytes", k[AS_CNT_FREE_DROPS_BYTES]},
          {"dropped_live_map_full", k[AS_CNT_LIVE_FULL] + p.live_full},
          {"dropped_live_map_full_bytes", k[AS_CNT_LIVE_FULL_BYTES] + p.live_full_bytes},
          {"dropped_stack_lost", sink_.stack_lost()},
          {"dropped_stack_lost_bytes", sink_.stack_lost_bytes()},
          {"dropped_stack_table_full", p.stacks_full + sink_.table_full()},
          {"dropped_stack_table_full_bytes", p.stacks_full_bytes + sink_.table_full_bytes()},
          {"dropped_exact_full", k[AS_CNT_EXACT_FULL]},
          {"dropped_exact_full_bytes", k[AS_CNT_EXACT_FULL_BYTES]},
          {"dropped_process_events", k[AS_CNT_PROC_DROPS]},
          {"children_not_followed", k[AS_CNT_PROC_TABLE_FULL]},
          {"libraries_not_probed", libraries_missed_},
          {"stacks_unwound", sink_.stacks_seen()},
          {"stacks_truncated", sink_.stacks_truncated()},
          {"walks_finished_in_userspace", sink_.walks_finished()},
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
          {"unwind_tables_failed", t.failed + t.full}};
}

ProgressFigures Recorder::progress_figures(double elapsed_s) const {
  Counters k = session_->counters();
  const ProfileCounters& p = profile_.counters();
  return {elapsed_s, sink_.recorded_processes(), k[AS_CNT_SAMPLES],
          k[AS_CNT_RINGBUF_DROPS] + k[AS_CNT_LIVE_FULL] + p.live_full + sink_.stack_lost() + p.stacks_full +
              k[AS_CNT_EXACT_FULL] + sink_.table_full()};
}

Recording Recorder::snapshot(uint64_t duration_ms) const {
  RecordingMeta meta{config_.rate,       start_wall_ns_, int64_t(duration_ms) * 1000000,
                     config_.metric,     counters(),     monotonic_ns()};
  Recording r = build_recording(profile_, symbolizer_, meta, sink_.origins());
  // Every output is written from what the saved pprof file holds (estimates
  // rounded), so `allocscope report` on it gives back the very same outputs.
  auto saved = decode_pprof(encode_pprof(r));
  return saved ? *saved : r;
}

Result<void> Recorder::write(unsigned number, uint64_t duration_ms) {
  if (exact()) {  // the kernel's totals, as of now
    sink_.absorb_exact(session_->exact_totals());
    if (!config_.no_free)
      sink_.set_live_times(session_->live_entries());
  }
  std::vector<OutputSpec> outputs = config_.outputs;
  if (number)
    for (OutputSpec& o : outputs)
      o.path = numbered_path(o.path, number);
  RenderOptions o = config_.render;
  o.metric = config_.metric;
  o.tool = std::string("allocscope ") + ALLOCSCOPE_VERSION_STRING;
  return write_outputs(snapshot(duration_ms), outputs, o);
}

void Recorder::print_summary(uint64_t elapsed_ms) const {
  double alloc = 0, live = 0;
  for (const StackRecord& s : profile_.stacks()) {
    alloc += s.totals.alloc_bytes;
    live += s.totals.live_bytes;
  }
  Counters k = session_->counters();
  const ProfileCounters& p = profile_.counters();
  uint64_t n = sink_.recorded_processes();
  std::string processes = std::to_string(n) + (n == 1 ? " process" : " processes");
  std::fprintf(stderr,
               "allocscope: %.1f s, rate %s, %llu samples, %zu stacks, %s, est. %s allocated, %s live; "
               "drops: ringbuf %llu, live-map-full %llu, stack-lost %llu, stack-table-full %llu\n",
               elapsed_ms / 1000.0, exact() ? "1 (exact)" : format_bytes(double(config_.rate)).c_str(),
               (unsigned long long)k[AS_CNT_SAMPLES], profile_.stacks().size(), processes.c_str(),
               format_bytes(alloc).c_str(), format_bytes(live).c_str(), (unsigned long long)k[AS_CNT_RINGBUF_DROPS],
               (unsigned long long)(k[AS_CNT_LIVE_FULL] + p.live_full), (unsigned long long)sink_.stack_lost(),
               (unsigned long long)(p.stacks_full + sink_.table_full()));
  if (config_.verbose) {
    std::fprintf(stderr,
                 "allocscope: kernel counters: samples=%llu frees=%llu nested=%llu failed_allocs=%llu "
                 "returns=%llu filtered=%llu table_requests=%llu frames=%llu row_cache_misses=%llu\n",
                 (unsigned long long)k[AS_CNT_SAMPLES], (unsigned long long)k[AS_CNT_FREES],
                 (unsigned long long)k[AS_CNT_NESTED], (unsigned long long)k[AS_CNT_FAILED_ALLOCS],
                 (unsigned long long)k[AS_CNT_RETURNS], (unsigned long long)k[AS_CNT_FILTERED],
                 (unsigned long long)k[AS_CNT_TABLE_REQUESTS], (unsigned long long)k[AS_CNT_FRAMES],
                 (unsigned long long)k[AS_CNT_ROW_MISSES]);
    const TableStats& t = tables_->stats();
    std::fprintf(stderr, "allocscope: unwind tables: %llu files, %llu rows (%.1f MiB), built in %.0f ms\n",
                 (unsigned long long)t.files, (unsigned long long)t.rows, t.rows * 8.0 / (1 << 20), t.build_ms);
  }
  if (uint64_t cut = sink_.stacks_truncated()) {
    std::string why;
    for (const auto& [name, n] : counters())
      if (name.rfind("truncated_", 0) == 0 && n)
        why += (why.empty() ? "" : ", ") + name.substr(10) + " " + std::to_string(n);
    std::fprintf(stderr, "allocscope: %llu of %llu distinct stacks cut short ([truncated]); walks that stopped early: %s\n",
                 (unsigned long long)cut, (unsigned long long)sink_.stacks_seen(), why.c_str());
  }
  print_process_drops();
  Recording lost;
  lost.rate = config_.rate;
  lost.counters = counters();
  if (std::string what = describe_loss(lost, config_.metric); !what.empty())
    error("warning: " + what);
  if (k[AS_CNT_RINGBUF_DROPS] || k[AS_CNT_FREE_DROPS])
    error("warning: the ring buffer overflowed. Raise --ringbuf-size" + std::string(exact() ? "." : " or --rate."));
  if (k[AS_CNT_EXACT_FULL])
    error("warning: the per-stack totals were full (exact mode). Raise --max-stacks.");
  if (k[AS_CNT_LIVE_FULL] || p.live_full)
    error("warning: the live table was full; inuse estimates are low. Raise --max-live.");
  if (p.stacks_full || sink_.table_full())
    error("warning: the stack table was full; estimates are low. Raise --max-stacks.");
  if (k[AS_CNT_PROC_DROPS])
    error("warning: process events were lost (ring buffer full); some ended processes may show live bytes.");
  if (k[AS_CNT_PROC_TABLE_FULL])
    error("warning: the process table was full; some children were not followed. Raise --max-processes.");
  if (libraries_missed_)
    error("warning: " + std::to_string(libraries_missed_) + " C library file(s) could not be probed (-v tells why)");
}

// The processes that lost the most samples, by cause.
void Recorder::print_process_drops() const {
  std::map<uint32_t, ProcessDrops> drops = sink_.drops();
  std::map<uint32_t, uint64_t> ringbuf;
  for (auto [tgid, n] : session_->process_drops()) {
    ringbuf[tgid] = n;
    ProcessDrops& d = drops[tgid];
    if (d.comm.empty()) {  // lost every sample it sent: named from its instance, or /proc
      auto id = sink_.processes().latest(tgid);
      d.comm = id ? sink_.processes().instance(*id).comm : sink_.last_name(tgid);
      if (d.comm.empty())
        d.comm = read_comm(pid_t(tgid));
    }
  }
  std::vector<std::pair<uint64_t, uint32_t>> worst;
  for (const auto& [tgid, d] : drops)
    worst.push_back({d.live_full + d.stack_lost + d.stack_table_full + ringbuf[tgid], tgid});
  std::sort(worst.rbegin(), worst.rend());
  for (size_t i = 0; i < worst.size() && i < 5 && worst[i].first; ++i) {
    const ProcessDrops& d = drops[worst[i].second];
    std::fprintf(stderr, "allocscope:   drops in %s (%u): ringbuf %llu, live-map-full %llu, stack-lost %llu, "
                 "stack-table-full %llu\n", d.comm.empty() ? "?" : d.comm.c_str(), worst[i].second,
                 (unsigned long long)ringbuf[worst[i].second], (unsigned long long)d.live_full,
                 (unsigned long long)d.stack_lost, (unsigned long long)d.stack_table_full);
  }
}

// Unwind tables of what the targets run, built before recording begins:
// samples taken before a file's table is in cannot be unwound past it.
void Recorder::prepare_tables(const std::vector<Target>& targets) {
  for (const Target& t : targets) {
    if (!t.launched()) {
      tables_->load_process(t.pid());
      continue;
    }
    std::string program = find_program(config_.command.front());
    if (program.empty())
      continue;
    std::vector<std::string> files = shared_libraries(program);
    files.push_back(program);
    tables_->load_paths(files);
  }
}

// Exact mode: the kernel's live entries of ended processes, deleted now and
// then (finding them means reading the whole live map).
void Recorder::sweep_exact_live(uint64_t now) {
  if (!exact() || !sink_.has_stale_live() || now - last_sweep_ms_ < 1000)
    return;
  last_sweep_ms_ = now;
  auto live = session_->live_entries();
  session_->forget_live(sink_.stale_live(live));
  sink_.forget_stale_ids();
}

int Recorder::run() {
  if (auto ok = open_session(); !ok) {
    error(ok.error());
    return 1;
  }
  auto made = make_targets();
  if (!made) {
    error(made.error());
    return 1;
  }
  std::vector<Target> targets = std::move(*made);
  if (config_.all) {
    if (auto ok = attach_every_process(); !ok) {
      error(ok.error());
      return 1;
    }
  }
  for (Target& t : targets) {
    if (auto ok = attach_process(t.pid()); !ok) {
      error(ok.error());
      return 1;
    }
  }
  if (config_.unwind == UnwindMode::Dwarf)
    prepare_tables(targets);
  install_stop_handlers();
  bool launched = !targets.empty() && targets.front().launched();
  if (launched) {
    if (auto ok = targets.front().start(); !ok) {
      error(ok.error());
      return 127;
    }
  }
  std::string names;
  for (Target& t : targets) {
    symbolizer_.track(t.pid());  // after exec: the command's maps
    names += (names.empty() ? "" : ", ") + std::to_string(t.pid()) + " (" + read_comm(t.pid()) + ")";
  }
  if (!config_.quiet) {
    if (config_.all && targets.empty())
      std::fprintf(stderr, "allocscope: recording every process (%zu C librar%s); Ctrl-C to stop\n",
                   allocator_offsets_.size(), allocator_offsets_.size() == 1 ? "y" : "ies");
    else
      std::fprintf(stderr, "allocscope: recording process%s %s%s; Ctrl-C to stop\n", targets.size() > 1 ? "es" : "",
                   names.c_str(), children() ? " and its descendants" : "");
  }

  start_wall_ns_ = wall_ns();
  uint64_t start = now_ms(), interval_start = start;
  unsigned interval = 0;
  bool target_gone = false;
  ProgressReporter progress(!config_.quiet);
  while (!g_stop_signal) {
    uint64_t now = now_ms();
    if (config_.duration_ms && now - start >= config_.duration_ms)
      break;
    if (config_.interval_ms && now - interval_start >= config_.interval_ms) {
      progress.finish();
      if (auto ok = write(++interval, now - interval_start); !ok)
        error(ok.error());
      profile_.reset_alloc_totals();  // the live set carries over
      interval_start = now;
      start_wall_ns_ = wall_ns();
    }
    uint64_t next_interval = config_.interval_ms ? interval_start + config_.interval_ms : UINT64_MAX;
    uint64_t next_stop = config_.duration_ms ? start + config_.duration_ms : UINT64_MAX;
    sink_.yield_at(std::min({next_interval, next_stop, now + 1000}));
    if (auto n = session_->poll(100); !n) {
      error(n.error());
      return 1;
    }
    if (!pending_.empty())
      find_pending_libraries(now_ms());
    sweep_exact_live(now_ms());
    if (double elapsed = (now_ms() - start) / 1000.0; progress.due(elapsed))
      progress.update(progress_figures(elapsed));  // the kernel's counters read only then
    if (!targets.empty() && std::all_of(targets.begin(), targets.end(), [](Target& t) { return t.exited(); })) {
      target_gone = true;
      break;
    }
  }
  progress.finish();
  uint64_t end = now_ms();
  session_->detach();
  while (session_->poll(0).value_or(0) > 0) {
  }
  if (!config_.quiet && target_gone && !launched)
    std::fprintf(stderr, "allocscope: the traced processes exited; inuse shows what they held at exit\n");

  auto written = write(config_.interval_ms ? interval + 1 : 0, end - interval_start);
  if (!written)
    error(written.error());
  if (!config_.quiet)
    print_summary(end - start);
  // A signal is passed on to a launched command; after --duration it runs on
  // untraced and allocscope waits for it.
  int status = launched ? targets.front().finish(target_gone ? 0 : int(g_stop_signal)) : 0;
  if (!written)
    return 1;
  return status;
}
}  // namespace

int record(const RecordConfig& config) { return Recorder(config).run(); }

}  // namespace allocscope
