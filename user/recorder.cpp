#include "recorder.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>

#include "allocator_probes.h"
#include "bpf_session.h"
#include "folded.h"
#include "process.h"
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

void error(const std::string& message) { std::fprintf(stderr, "allocscope: %s\n", message.c_str()); }

// Ring buffer records -> profile; new stacks are readied for symbolization
// while their process is alive.
class EventSink {
 public:
  EventSink(Profile& profile, Symbolizer& symbolizer) : profile_(profile), symbolizer_(symbolizer) {}

  void operator()(std::span<const uint8_t> data) {
    if (data.size() < sizeof(as_event))
      return;
    as_event e;
    std::memcpy(&e, data.data(), sizeof e);
    if (e.kind == AS_EV_FREE) {
      profile_.on_free(e.tgid, e.addr);
      return;
    }
    if (e.kind != AS_EV_ALLOC)
      return;
    size_t nframes = std::min<size_t>(e.nframes, (data.size() - sizeof e) / sizeof(uint64_t));
    ips_.resize(nframes);
    std::memcpy(ips_.data(), data.data() + sizeof e, nframes * sizeof(uint64_t));
    size_t before = profile_.stacks().size();
    profile_.on_alloc({.pid = e.tgid,
                       .fn = e.fn,
                       .addr = e.addr,
                       .size = e.size,
                       .live_tracked = !(e.flags & AS_EVF_LIVE_DROPPED),
                       .ips = ips_});
    if (profile_.stacks().size() != before)
      symbolizer_.prepare(e.tgid, ips_);
  }

 private:
  Profile& profile_;
  Symbolizer& symbolizer_;
  std::vector<uint64_t> ips_;
};

std::vector<FoldedStack> symbolize(const Profile& profile, Symbolizer& symbolizer, Metric metric) {
  std::vector<FoldedStack> out;
  for (const StackRecord& s : profile.stacks()) {
    FoldedStack f;
    f.value = s.totals.value(metric);
    f.frames.push_back(symbolizer.process_label(s.pid));
    if (s.ips.empty())
      f.frames.push_back("[no stack]");
    for (auto ip = s.ips.rbegin(); ip != s.ips.rend(); ++ip)
      f.frames.push_back(symbolizer.frame_name(s.pid, *ip));
    f.frames.push_back(fn_name(s.fn));
    out.push_back(std::move(f));
  }
  return out;
}

// Written to a temporary file and renamed, so a failed run leaves no half file.
Result<void> write_output(const std::string& path, const std::vector<FoldedStack>& stacks) {
  if (path == "-") {
    write_folded(std::cout, stacks);
    std::cout.flush();
    return {};
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out)
      return fail(errno_message("write " + path, errno));
    write_folded(out, stacks);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return fail(errno_message("write " + path, errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    return fail(errno_message("write " + path, err));
  }
  return {};
}

void print_summary(const RecordConfig& config, const Profile& profile, const Counters& k, uint64_t elapsed_ms) {
  double alloc = 0, live = 0;
  for (const StackRecord& s : profile.stacks()) {
    alloc += s.totals.alloc_bytes;
    live += s.totals.live_bytes;
  }
  const ProfileCounters& p = profile.counters();
  std::fprintf(stderr,
               "allocscope: %.1f s, rate %s, %llu samples, %zu stacks, est. %s allocated, %s live; "
               "drops: ringbuf %llu, live-map-full %llu, stack-read %llu, stack-table-full %llu\n",
               elapsed_ms / 1000.0, config.rate <= 1 ? "1 (exact)" : format_bytes(double(config.rate)).c_str(),
               (unsigned long long)k[AS_CNT_SAMPLES], profile.stacks().size(), format_bytes(alloc).c_str(),
               format_bytes(live).c_str(), (unsigned long long)k[AS_CNT_RINGBUF_DROPS],
               (unsigned long long)(k[AS_CNT_LIVE_FULL] + p.live_full), (unsigned long long)k[AS_CNT_STACK_FAIL],
               (unsigned long long)p.stacks_full);
  if (config.verbose)
    std::fprintf(stderr,
                 "allocscope: kernel counters: samples=%llu frees=%llu nested=%llu failed_allocs=%llu "
                 "returns=%llu\n",
                 (unsigned long long)k[AS_CNT_SAMPLES], (unsigned long long)k[AS_CNT_FREES],
                 (unsigned long long)k[AS_CNT_NESTED], (unsigned long long)k[AS_CNT_FAILED_ALLOCS],
                 (unsigned long long)k[AS_CNT_RETURNS]);
  if (k[AS_CNT_RINGBUF_DROPS])
    error("warning: the ring buffer overflowed; estimates are low. Raise --ringbuf-size or --rate.");
  if (k[AS_CNT_LIVE_FULL] || p.live_full)
    error("warning: the live table was full; inuse estimates are low. Raise --max-live.");
  if (p.stacks_full)
    error("warning: the stack table was full; estimates are low. Raise --max-stacks.");
}

void print_placement(const std::string& path, const std::vector<ProbeTarget>& targets, ProbeMode mode) {
  std::fprintf(stderr, "allocscope: %s probes in %s:\n", probe_mode_name(mode), path.c_str());
  for (const ProbeTarget& t : targets)
    std::fprintf(stderr, "  %-15s +%-3llu %-24s %s\n", fn_name(t.fn), (unsigned long long)t.placed_at,
                 t.instruction.c_str(), t.emulated ? "emulated" : "single-stepped");
}

// Attaches the allocator probes of the C library `pid` maps.
Result<void> attach_allocator(BpfSession& session, pid_t pid, const RecordConfig& config) {
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
  auto targets = find_allocator_probes(path, config.naive_placement);
  if (!targets)
    return fail(targets.error());
  if (config.verbose)
    print_placement(libc->path, *targets, session.mode());
  return session.attach(pid, path, *targets);
}

}  // namespace

int record(const RecordConfig& config) {
  Profile profile(config.rate, config.max_stacks, config.max_live);
  Symbolizer symbolizer;
  EventSink sink(profile, symbolizer);
  SessionConfig sc{.rate = config.rate,
                   .max_live = config.max_live,
                   .ringbuf_bytes = config.ringbuf_bytes,
                   .mode = config.probe_mode,
                   .null_probes = config.null_probes,
                   .no_free = config.no_free,
                   .verbose = config.verbose};
  auto session = BpfSession::open(sc, std::ref(sink));
  if (!session) {
    error(session.error());
    return 1;
  }
  auto target = config.command.empty() ? Target::attach(config.pid) : Target::launch(config.command);
  if (!target) {
    error(target.error());
    return 1;
  }
  if (auto ok = attach_allocator(**session, target->pid(), config); !ok) {
    error(ok.error());
    return 1;
  }
  install_stop_handlers();
  if (target->launched()) {
    if (auto ok = target->start(); !ok) {
      error(ok.error());
      return 127;
    }
  }
  symbolizer.track(target->pid());  // after exec: the command's name and maps
  if (!config.quiet)
    std::fprintf(stderr, "allocscope: recording process %d (%s); Ctrl-C to stop\n", target->pid(),
                 read_comm(target->pid()).c_str());

  uint64_t start = now_ms();
  bool target_gone = false;
  while (!g_stop_signal) {
    if (config.duration_ms && now_ms() - start >= config.duration_ms)
      break;
    if (auto n = (*session)->poll(100); !n) {
      error(n.error());
      return 1;
    }
    if (target->exited()) {
      target_gone = true;
      break;
    }
  }
  uint64_t elapsed = now_ms() - start;
  (*session)->detach();
  while ((*session)->poll(0).value_or(0) > 0) {
  }
  if (!config.quiet && target_gone && !target->launched())
    std::fprintf(stderr, "allocscope: process %d exited; inuse shows what it held at exit\n", target->pid());

  auto written = write_output(config.output, symbolize(profile, symbolizer, config.metric));
  if (!written)
    error(written.error());
  if (!config.quiet)
    print_summary(config, profile, (*session)->counters(), elapsed);
  // A signal is passed on to a launched command; after --duration it runs on
  // untraced and allocscope waits for it.
  int status = target->finish(target_gone ? 0 : int(g_stop_signal));
  if (!written)
    return 1;
  return target->launched() ? status : 0;
}

}  // namespace allocscope
