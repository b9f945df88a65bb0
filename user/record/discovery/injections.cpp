#include "record/discovery/injections.h"

#include <cerrno>
#include <cstdio>

#include "host/preload_library.h"
#include "host/process.h"
#include "probe/answered_channel.h"
#include "record/messages.h"
#include "record/record.h"
#include "record/scope.h"
#include "symbols/elf_file.h"
#include "symbols/go_build.h"

namespace allocscope {
namespace {

constexpr auto kEntryBudget = std::chrono::milliseconds(3000);

std::string process_named(pid_t pid, const std::string& comm) {
  return "process " + std::to_string(pid) + " (" + comm + ")";
}

bool is_go_program(pid_t pid) {
  auto elf = ElfFile::open("/proc/" + std::to_string(pid) + "/exe");
  return elf && go_build(*elf).has_value();
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

bool injects(const RecordConfig& c) {
  return c.inject && !c.pids.empty() && c.command.empty() && !c.all && c.rate > 1 && !c.duty_period_ms &&
         !c.probes_chosen();
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
  Refusal r{pid, read_comm(pid), why};
  if (!config_.quiet)
    std::fprintf(stderr, "allocscope: %s: its allocator is probed (a trap at every call): %s\n",
                 process_named(pid, r.comm).c_str(), why.c_str());
  refused_.push_back(std::move(r));
}

bool Injections::enter(pid_t pid, AnsweredChannel* rings) {
  if (is_go_program(pid)) return false;  // its heap is Go's, read through its runtime
  auto image = library();
  if (!image) {
    refuse(pid, image.error().message);
    return false;
  }
  inject::InjectOptions options;
  options.library = *image;
  options.rate = config_.rate;
  options.budget = kEntryBudget;
  if (rings && !config_.no_free)
    options.make_ring = [rings, pid](UniqueFd memfd) { return rings->adopt_ring(pid, std::move(memfd)); };
  auto done = inject::inject(pid, options);
  if (!done) {
    refuse(pid, done.error().message);
    return false;
  }
  ++entered_;
  pauses_us_.push_back(uint64_t(done->paused.count()));
  if (config_.verbose)
    std::fprintf(
        stderr,
        "allocscope: %s samples in process: the library %s in %.1f ms (thread %d held), %u allocator "
        "slots in %u modules\n",
        process_named(pid, read_comm(pid)).c_str(), done->loaded_now ? "loaded" : "woken",
        double(done->paused.count()) / 1e3, int(done->borrowed), done->answer.slots, done->answer.modules);
  live_.push_back(std::move(*done));
  return true;
}

void Injections::eject_all() {
  for (const inject::Injection& in : live_) {
    if (!process_exists(in.pid) || read_maps(in.pid).value_or(std::vector<Mapping>{}).empty())
      continue;  // gone, or a zombie: nothing to give back
    auto out = inject::eject(in, kEntryBudget);
    if (out)
      pauses_us_.push_back(uint64_t(out->paused.count()));
    else if (!config_.quiet && out.error().code != ESRCH)
      print_error("warning: process " + std::to_string(in.pid) +
                  " keeps allocscope's library in its allocator's path (dormant, it forwards each call): " +
                  out.error().message);
  }
  live_.clear();
}

}  // namespace allocscope
