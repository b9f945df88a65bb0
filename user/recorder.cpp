#include "recorder.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "allocator_probes.h"
#include "dwarf_unwinder.h"
#include "pprof.h"
#include "process.h"
#include "recording_builder.h"
#include "symbolizer.h"
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

// Ring buffer records -> profile; new stacks are readied for symbolization
// while their process is alive. Stack snapshots are unwound with DWARF CFI.
class EventSink {
 public:
  EventSink(Profile& profile, Symbolizer& symbolizer, UnwindMode mode)
      : profile_(profile), symbolizer_(symbolizer), mode_(mode) {}

  void operator()(std::span<const uint8_t> data) {
    if (data.size() < sizeof(as_event))
      return;
    as_event e;
    std::memcpy(&e, data.data(), sizeof e);
    if (e.kind == AS_EV_FREE) {
      profile_.on_free(e.tgid, e.addr, e.ts_ns);
      return;
    }
    if (e.kind != AS_EV_ALLOC || data.size() < sizeof(as_alloc_event))
      return;
    size_t nframes = std::min<size_t>(e.nframes, AS_MAX_FRAMES);
    ips_.resize(nframes);
    std::memcpy(ips_.data(), data.data() + sizeof e, nframes * sizeof(uint64_t));
    // A process's first sample wakes us at once (see the BPF side): read its
    // mappings while it most likely still lives.
    if (refreshed_.insert(e.tgid).second)
      symbolizer_.refresh(pid_t(e.tgid));
    if ((e.flags & AS_EVF_SNAPSHOT) && mode_ != UnwindMode::Fp)
      unwind(e.tgid, data.subspan(sizeof(as_alloc_event)));
    size_t before = profile_.stacks().size();
    profile_.on_alloc({.pid = e.tgid,
                       .fn = e.fn,
                       .addr = e.addr,
                       .size = e.size,
                       .offset = e.offset,
                       .ts_ns = e.ts_ns,
                       .live_tracked = !(e.flags & AS_EVF_LIVE_DROPPED),
                       .ips = ips_});
    if (profile_.stacks().size() != before)
      symbolizer_.prepare(e.tgid, ips_);
  }

  uint64_t unwinds() const { return unwinds_; }
  uint64_t truncated() const { return truncated_; }

 private:
  // Replaces the frame-pointer stack in ips_ with the DWARF unwind of the
  // snapshot, unless (auto mode) the frame pointers reached further.
  void unwind(uint32_t pid, std::span<const uint8_t> rest) {
    as_stack_snapshot raw;
    if (rest.size() < sizeof raw)
      return;
    std::memcpy(&raw, rest.data(), sizeof raw);
    StackSnapshot snap;
    std::copy(std::begin(raw.regs), std::end(raw.regs), snap.regs);
    snap.sp = raw.sp;
    snap.stack = rest.subspan(sizeof raw, std::min<size_t>(raw.len, rest.size() - sizeof raw));
    UnwindResult u = unwinder_.unwind(pid_t(pid), symbolizer_.maps(pid_t(pid)), snap);
    if (u.truncated && u.stop_reason.find("no mapping") != std::string::npos) {  // dlopen since
      symbolizer_.refresh(pid_t(pid));
      u = unwinder_.unwind(pid_t(pid), symbolizer_.maps(pid_t(pid)), snap);
    }
    ++unwinds_;
    truncated_ += u.truncated;
    if (mode_ == UnwindMode::Auto && u.ips.size() < ips_.size())
      return;
    ips_ = std::move(u.ips);
    if (u.truncated)
      ips_.push_back(kTruncatedFrame);
  }

  Profile& profile_;
  Symbolizer& symbolizer_;
  UnwindMode mode_;
  DwarfUnwinder unwinder_;
  std::unordered_set<uint32_t> refreshed_;
  std::vector<uint64_t> ips_;
  uint64_t unwinds_ = 0, truncated_ = 0;
};

void print_placement(const std::string& path, const std::vector<ProbeTarget>& targets, ProbeMode mode) {
  std::fprintf(stderr, "allocscope: %s probes in %s:\n", probe_mode_name(mode), path.c_str());
  for (const ProbeTarget& t : targets)
    std::fprintf(stderr, "  %-15s +%-3llu %-24s %s\n", fn_name(t.fn), (unsigned long long)t.placed_at,
                 t.instruction.c_str(), t.emulated ? "emulated" : "single-stepped");
}

class Recorder {
 public:
  explicit Recorder(const RecordConfig& c)
      : config_(c), profile_(c.rate, c.max_stacks, c.max_live), sink_(profile_, symbolizer_, c.unwind) {}

  int run();

 private:
  Result<void> attach_allocator(pid_t pid);
  std::vector<std::pair<std::string, uint64_t>> counters() const;
  Recording snapshot(uint64_t duration_ms) const;
  Result<void> write(unsigned number, uint64_t duration_ms);
  void print_summary(uint64_t elapsed_ms) const;

  const RecordConfig& config_;
  Profile profile_;
  mutable Symbolizer symbolizer_;
  EventSink sink_;
  std::unique_ptr<BpfSession> session_;
  std::map<std::pair<uint32_t, int>, uint64_t> allocator_addresses_;  // (pid, fn) -> entry
  int64_t start_wall_ns_ = 0;
};

// Attaches the allocator probes of the C library `pid` maps.
Result<void> Recorder::attach_allocator(pid_t pid) {
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
  std::string path = mapped_file_path(pid, *libc);
  auto targets = find_allocator_probes(path, config_.naive_placement);
  if (!targets)
    return fail(targets.error());
  if (config_.verbose)
    print_placement(libc->path, *targets, session_->mode());
  for (const ProbeTarget& t : *targets)
    for (const Mapping& m : *maps)
      if (m.inode == libc->inode && m.executable && t.offset >= m.offset && t.offset < m.offset + m.end - m.start)
        allocator_addresses_[{uint32_t(pid), t.fn}] = m.start + (t.offset - t.placed_at - m.offset);
  return session_->attach(pid, path, *targets);
}

std::vector<std::pair<std::string, uint64_t>> Recorder::counters() const {
  Counters k = session_->counters();
  const ProfileCounters& p = profile_.counters();
  return {{"samples", k[AS_CNT_SAMPLES]},
          {"frees_seen", k[AS_CNT_FREES]},
          {"dropped_ringbuf", k[AS_CNT_RINGBUF_DROPS]},
          {"dropped_live_map_full", k[AS_CNT_LIVE_FULL] + p.live_full},
          {"dropped_stack_read", k[AS_CNT_STACK_FAIL]},
          {"dropped_stack_table_full", p.stacks_full},
          {"dwarf_unwinds", sink_.unwinds()},
          {"dwarf_unwinds_truncated", sink_.truncated()}};
}

Recording Recorder::snapshot(uint64_t duration_ms) const {
  RecordingMeta meta{config_.rate,       start_wall_ns_, int64_t(duration_ms) * 1000000,
                     config_.metric,     counters(),     monotonic_ns()};
  Recording r = build_recording(profile_, symbolizer_, meta, [this](uint32_t pid, int fn) {
    auto it = allocator_addresses_.find({pid, fn});
    return it == allocator_addresses_.end() ? 0 : it->second;
  });
  // Every output is written from what the saved pprof file holds (estimates
  // rounded), so `allocscope report` on it gives back the very same outputs.
  auto saved = decode_pprof(encode_pprof(r));
  return saved ? *saved : r;
}

Result<void> Recorder::write(unsigned number, uint64_t duration_ms) {
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
  std::fprintf(stderr,
               "allocscope: %.1f s, rate %s, %llu samples, %zu stacks, est. %s allocated, %s live; "
               "drops: ringbuf %llu, live-map-full %llu, stack-read %llu, stack-table-full %llu\n",
               elapsed_ms / 1000.0, config_.rate <= 1 ? "1 (exact)" : format_bytes(double(config_.rate)).c_str(),
               (unsigned long long)k[AS_CNT_SAMPLES], profile_.stacks().size(), format_bytes(alloc).c_str(),
               format_bytes(live).c_str(), (unsigned long long)k[AS_CNT_RINGBUF_DROPS],
               (unsigned long long)(k[AS_CNT_LIVE_FULL] + p.live_full), (unsigned long long)k[AS_CNT_STACK_FAIL],
               (unsigned long long)p.stacks_full);
  if (config_.verbose)
    std::fprintf(stderr,
                 "allocscope: kernel counters: samples=%llu frees=%llu nested=%llu failed_allocs=%llu "
                 "returns=%llu\n",
                 (unsigned long long)k[AS_CNT_SAMPLES], (unsigned long long)k[AS_CNT_FREES],
                 (unsigned long long)k[AS_CNT_NESTED], (unsigned long long)k[AS_CNT_FAILED_ALLOCS],
                 (unsigned long long)k[AS_CNT_RETURNS]);
  if (sink_.unwinds())
    std::fprintf(stderr, "allocscope: %llu stacks unwound with DWARF, %llu of them cut short ([truncated])\n",
                 (unsigned long long)sink_.unwinds(), (unsigned long long)sink_.truncated());
  if (k[AS_CNT_RINGBUF_DROPS])
    error("warning: the ring buffer overflowed; estimates are low. Raise --ringbuf-size or --rate.");
  if (k[AS_CNT_LIVE_FULL] || p.live_full)
    error("warning: the live table was full; inuse estimates are low. Raise --max-live.");
  if (p.stacks_full)
    error("warning: the stack table was full; estimates are low. Raise --max-stacks.");
}

int Recorder::run() {
  SessionConfig sc{.rate = config_.rate,
                   .max_live = config_.max_live,
                   .ringbuf_bytes = config_.ringbuf_bytes,
                   .mode = config_.probe_mode,
                   .null_probes = config_.null_probes,
                   .no_free = config_.no_free,
                   .stack_bytes = config_.unwind == UnwindMode::Fp ? 0 : config_.stack_bytes,
                   .verbose = config_.verbose};
  auto session = BpfSession::open(sc, std::ref(sink_));
  if (!session) {
    error(session.error());
    return 1;
  }
  session_ = std::move(*session);
  std::vector<Target> targets;
  if (!config_.command.empty()) {
    auto t = Target::launch(config_.command);
    if (!t) {
      error(t.error());
      return 1;
    }
    targets.push_back(std::move(*t));
  }
  for (pid_t pid : config_.pids) {
    auto t = Target::attach(pid);
    if (!t) {
      error(t.error());
      return 1;
    }
    targets.push_back(std::move(*t));
  }
  for (Target& t : targets) {
    if (auto ok = attach_allocator(t.pid()); !ok) {
      error(ok.error());
      return 1;
    }
  }
  install_stop_handlers();
  Target& first = targets.front();
  if (first.launched()) {
    if (auto ok = first.start(); !ok) {
      error(ok.error());
      return 127;
    }
  }
  std::string names;
  for (Target& t : targets) {
    symbolizer_.track(t.pid());  // after exec: the command's name and maps
    names += (names.empty() ? "" : ", ") + std::to_string(t.pid()) + " (" + read_comm(t.pid()) + ")";
  }
  if (!config_.quiet)
    std::fprintf(stderr, "allocscope: recording process%s %s; Ctrl-C to stop\n", targets.size() > 1 ? "es" : "",
                 names.c_str());

  start_wall_ns_ = wall_ns();
  uint64_t start = now_ms(), interval_start = start;
  unsigned interval = 0;
  bool target_gone = false;
  while (!g_stop_signal) {
    uint64_t now = now_ms();
    if (config_.duration_ms && now - start >= config_.duration_ms)
      break;
    if (config_.interval_ms && now - interval_start >= config_.interval_ms) {
      if (auto ok = write(++interval, now - interval_start); !ok)
        error(ok.error());
      profile_.reset_alloc_totals();  // the live set carries over
      interval_start = now;
      start_wall_ns_ = wall_ns();
    }
    if (auto n = session_->poll(100); !n) {
      error(n.error());
      return 1;
    }
    if (std::all_of(targets.begin(), targets.end(), [](Target& t) { return t.exited(); })) {
      target_gone = true;
      break;
    }
  }
  uint64_t end = now_ms();
  session_->detach();
  while (session_->poll(0).value_or(0) > 0) {
  }
  if (!config_.quiet && target_gone && !first.launched())
    std::fprintf(stderr, "allocscope: the traced processes exited; inuse shows what they held at exit\n");

  auto written = write(config_.interval_ms ? interval + 1 : 0, end - interval_start);
  if (!written)
    error(written.error());
  if (!config_.quiet)
    print_summary(end - start);
  // A signal is passed on to a launched command; after --duration it runs on
  // untraced and allocscope waits for it.
  int status = first.finish(target_gone ? 0 : int(g_stop_signal));
  if (!written)
    return 1;
  return first.launched() ? status : 0;
}

}  // namespace

int record(const RecordConfig& config) { return Recorder(config).run(); }

}  // namespace allocscope
