#include "record/discovery/injections.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "host/answered_channel.h"
#include "host/preload_library.h"
#include "host/process.h"
#include "record/messages.h"
#include "record/record.h"
#include "record/scope.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

constexpr auto kEntryBudget = std::chrono::milliseconds(3000);

std::string process_named(pid_t pid, const std::string& comm) {
  return "process " + std::to_string(pid) + " (" + comm + ")";
}

}  // namespace

std::string describe_entries(size_t entered, size_t probed) {
  auto processes = [](size_t n) { return std::to_string(n) + (n == 1 ? " process" : " processes"); };
  std::string in = "in process (" + processes(entered) + " entered)";
  if (!entered && !probed) return "";
  if (!probed) return in;
  std::string probes = "allocator probes (" + processes(probed) + ")";
  return entered ? in + ", " + probes : probes;
}

std::string describe_busy_entries(size_t entered, size_t refused) {
  auto processes = [](size_t n) { return std::to_string(n) + (n == 1 ? " process" : " processes"); };
  std::string s = "allocator probes, in process where busy (" + processes(entered) + " entered";
  return s + (refused ? ", " + std::to_string(refused) + " could not be)" : ")");
}

bool injects(const RecordConfig& c) {
  return c.inject && !c.pids.empty() && c.command.empty() && !c.all && c.rate > 1 && !c.duty_period_ms &&
         !c.probes_chosen();
}

bool enters_busy(const RecordConfig& c) {
  return c.inject && system_wide(c) && c.command.empty() && c.rate > 1 && !c.duty_period_ms &&
         !c.probes_chosen();
}

double busy_threshold(double trap_ns) {
  constexpr double kShareOfCore = 0.01, kTrapsPerCall = 2;
  constexpr double kUntimedTrapNs = 500;  // bare metal's dearest (0.3 to 0.5 us)
  double ns = trap_ns > 0 ? trap_ns : kUntimedTrapNs;
  return kShareOfCore * 1e9 / (kTrapsPerCall * ns);
}

double entry_worth(double trap_ns) {
  constexpr double kEntryPauseNs = 20e6, kTrapsPerCall = 2, kUntimedTrapNs = 500;
  return kEntryPauseNs / (kTrapsPerCall * (trap_ns > 0 ? trap_ns : kUntimedTrapNs));
}

std::vector<uint32_t> BusyStreaks::note(std::span<const std::pair<uint32_t, uint64_t>> calls, double seconds,
                                        double threshold, double worth) {
  std::set<uint32_t> busy;
  std::vector<uint32_t> entered;
  for (const auto& [tgid, n] : calls) {
    if (seconds <= 0 || double(n) / seconds < threshold) continue;
    busy.insert(tgid);
    if (busy_before_.contains(tgid) || double(n) >= worth) entered.push_back(tgid);
  }
  busy_before_ = std::move(busy);
  return entered;
}

Injections::Identity Injections::identity(pid_t pid) {
  struct stat program {};
  uint64_t inode =
      ::stat(("/proc/" + std::to_string(pid) + "/exe").c_str(), &program) == 0 ? program.st_ino : 0;
  return {pid, process_start_time(pid), inode};
}

void Injections::keep_pause(std::chrono::microseconds paused) {
  if (pauses_us_.size() < kMaxKept) pauses_us_.push_back(uint64_t(paused.count()));
}

bool Injections::entered_now(pid_t pid) {
  auto in =
      std::find_if(live_.begin(), live_.end(), [pid](const inject::Injection& i) { return i.pid == pid; });
  if (in == live_.end()) return false;
  if (inject::still_entered(*in)) return true;
  live_.erase(in);
  return false;
}

const inject::Injection* Injections::find(pid_t pid) const {
  for (const inject::Injection& i : live_)
    if (i.pid == pid) return &i;
  return nullptr;
}

bool Injections::refused_before(pid_t pid) const { return refused_ids_.contains(identity(pid)); }

void Injections::pass_over(pid_t pid) { refused_ids_.insert(identity(pid)); }

void Injections::forget_ended() {
  std::erase_if(live_, [](const inject::Injection& i) { return !process_exists(i.pid); });
  std::erase_if(refused_ids_, [](const Identity& id) { return identity(std::get<0>(id)) != id; });
}

std::vector<pid_t> Injections::entered_pids() const {
  std::vector<pid_t> pids;
  for (const inject::Injection& i : live_) pids.push_back(i.pid);
  return pids;
}

Result<std::shared_ptr<const inject::LibraryImage>> Injections::library() {
  if (library_) return library_;
  auto path = find_preload_library();
  if (!path) return fail(path.error());
  auto image = inject::read_library_image(*path);
  if (!image) return fail(image.error());
  library_ = *image;
  return library_;
}

void Injections::refuse(pid_t pid, const std::string& why) {
  // One that ended while it was being entered was not refused: under --all,
  // short-lived processes did so by the hundred, each with a line.
  if (!process_exists(pid)) return;
  Refusal r{pid, read_comm(pid), why};
  if (!config_.quiet)
    std::fprintf(stderr, "allocscope: %s: its allocator is probed (a trap at every call): %s\n",
                 process_named(pid, r.comm).c_str(), why.c_str());
  ++refusals_;
  refused_ids_.insert(identity(pid));
  if (refused_.size() < kMaxKept) refused_.push_back(std::move(r));
}

const inject::Injection* Injections::enter(pid_t pid, AnsweredChannel* rings, Hooks hooks) {
  if (runtimes_.reads_heap_of(pid)) {  // its heap is a runtime's (Go's), read through it
    pass_over(pid);
    return nullptr;
  }
  if (live_.size() >= kMaxLive) {
    refuse(pid, std::to_string(kMaxLive) + " processes are entered already (allocscope's bound)");
    return nullptr;
  }
  auto image = library();
  if (!image) {
    refuse(pid, image.error().message);
    return nullptr;
  }
  inject::InjectOptions options;
  options.library = *image;
  options.rate = config_.rate;
  options.budget = kEntryBudget;
  options.no_java = config_.no_java_heap;
  options.loaded = std::move(hooks.loaded);
  options.seeds = std::move(hooks.seeds);
  options.held = std::move(hooks.held);
  if (rings && !config_.no_free)
    options.make_ring = [rings, pid](UniqueFd memfd) { return rings->adopt_ring(pid, std::move(memfd)); };
  auto done = inject::inject(pid, options);
  if (!done) {
    refuse(pid, done.error().message);
    return nullptr;
  }
  ++entered_;
  keep_pause(done->paused);
  if (config_.verbose)
    std::fprintf(
        stderr,
        "allocscope: %s samples in process: the library %s in %.1f ms (thread %d held), %u allocator "
        "slots in %u modules\n",
        process_named(pid, read_comm(pid)).c_str(), done->loaded_now ? "loaded" : "woken",
        double(done->paused.count()) / 1e3, int(done->borrowed), done->answer.slots, done->answer.modules);
  live_.push_back(std::move(*done));
  return &live_.back();
}

void Injections::eject_all() {
  for (const inject::Injection& in : live_) {
    if (!process_exists(in.pid) || read_maps(in.pid).value_or(std::vector<Mapping>{}).empty())
      continue;  // gone, or a zombie: nothing to give back
    auto out = inject::eject(in, kEntryBudget);
    if (out)
      keep_pause(out->paused);
    else if (!config_.quiet && out.error().code != ESRCH)
      print_error("warning: process " + std::to_string(in.pid) +
                  " keeps allocscope's library in its allocator's path (dormant, it forwards each call): " +
                  out.error().message);
  }
  live_.clear();
}

}  // namespace allocscope
