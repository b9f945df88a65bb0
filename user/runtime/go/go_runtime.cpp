#include "runtime/go/go_runtime.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "base/clocks.h"
#include "host/process.h"
#include "probe/placement/allocator_entries.h"
#include "probe/session/bpf_session.h"
#include "runtime/go/build.h"

namespace allocscope {
namespace {

constexpr size_t kNamed = 8;                // programs named in a line, of each kind
constexpr size_t kMaxRemembered = 1 << 16;  // files remembered (beyond: forgotten, read again)

std::string joined(const std::vector<std::string>& names, uint64_t count) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  if (count > names.size()) s += " and " + std::to_string(count - names.size()) + " more";
  return s;
}

// What a slot's probe is told (its count aside).
std::array<uint64_t, 8> slot_key(const as_go_profile& g) {
  return {g.probe, g.rate, g.mallocgc, g.mallocgc_end, g.args, g.profstack, g.sized, g.sized_end};
}

std::string release_of(const GoBuild& go) { return go.version.empty() ? "go1.17 or older" : go.version; }

}  // namespace

GoRuntime::GoRuntime(const RuntimeSettings& settings, BpfSession* session)
    : settings_(settings),
      session_(session),
      off_(settings.off.contains("go")),
      by_calls_(settings.by_calls.contains("go")) {
  if (!session) return;
  if (auto m = session->typed_map<uint32_t, as_go_profile>("go_profiles"))
    profiles_.emplace(std::move(*m));
  else  // allocscope's own BPF object without it: a defect, said
    std::fprintf(stderr, "allocscope: warning: go: runtime sampling unread: %s\n", m.error().message.c_str());
}

// One slot per distinct Go program: the probes of each process running it
// share it (their cookies name it).
std::string GoRuntime::place_slots(std::vector<ProbeTarget>& targets) {
  for (ProbeTarget& t : targets) {
    if (!t.go_profile) continue;
    if (!profiles_) return "allocscope's BPF object has no go_profiles";
    const as_go_profile& g = *t.go_profile;
    auto [it, made] = slots_.try_emplace(slot_key(g), uint32_t(slots_.size()));
    if (made && it->second >= AS_GO_MAX_PROGRAMS) {
      slots_.erase(it);
      return "Go programs whose runtime sampling is read: table full (" + std::to_string(AS_GO_MAX_PROGRAMS) +
             " programs)";
    }
    if (made)
      if (auto ok = profiles_->put(it->second, g, "set up Go's runtime sampling"); !ok) {
        slots_.erase(it);
        return ok.error().message;
      }
    t.go_cookie = uint64_t(it->second) << AS_COOKIE_GO_SHIFT;
  }
  return "";
}

uint64_t GoRuntime::calls_of(const as_go_profile& g) const {
  auto it = slots_.find(slot_key(g));
  if (it == slots_.end() || !profiles_) return 0;
  std::optional<as_go_profile> now = profiles_->get(it->second);
  return now ? now->calls : 0;
}

HeapRoute GoRuntime::choose_targets(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                                    const std::vector<ProbeTarget>& found) {
  GoHeapChoice c = pick_go_heap(targets, settings_.rate, by_calls_, off_,
                                settings_.writes_processes && (settings_.system_wide || file.pid > 0));
  if (c.sets_rate) set_rate(file, targets, found, c);
  if (c.route == GoHeapRoute::Runtime && session_)
    if (std::string full = place_slots(targets); !full.empty()) {  // this one's heap by mallocgc's calls
      targets = found;
      c = pick_go_heap(targets, settings_.rate, true, false);
      c.why_calls = full;
    }
  bool go = std::any_of(found.begin(), found.end(),
                        [](const ProbeTarget& t) { return is_go_entry(as_fn_kind(t.fn)); });
  if (!go) return {};
  FileKey key{file.kernel_dev, file.ino};
  if (choices_.size() >= kMaxRemembered) choices_.clear();
  choices_[key] = c;
  return {.probed = c.route != GoHeapRoute::None,
          .unprobed = targets.empty() ? "a Go program, its heap left unprobed (--no-go-heap)" : ""};
}

void GoRuntime::on_probed(const ProbedFile& file, const std::vector<ProbeTarget>& attached) {
  auto c = choices_.find({file.kernel_dev, file.ino});
  if (c == choices_.end()) {
    if (attached.empty()) note_program(file, {});  // no allocator: a Go build before 1.18 tells
    return;
  }
  GoHeapChoice choice = c->second;
  choices_.erase(c);
  FileKey key{file.kernel_dev, file.ino};
  if (choice.route == GoHeapRoute::Runtime)
    for (const ProbeTarget& t : attached)
      if (t.go_profile && runtimes_.size() < kMaxRemembered)
        runtimes_.try_emplace(key, file.shown, *t.go_profile);
  note_program(file, choice);
}

// Counted once a file, whatever the processes running it.
void GoRuntime::note_program(const ProbedFile& file, const GoHeapChoice& c) {
  FileKey key{file.kernel_dev, file.ino};
  if (files_.contains(key)) return;
  const ElfFile* elf = file.elf ? file.elf() : nullptr;
  std::optional<GoBuild> go = elf ? go_build(*elf) : std::nullopt;
  if (!go) return;
  if (files_.size() >= kMaxRemembered) files_.clear();
  const std::string& version = files_[key] = release_of(*go);
  Programs& counted = c.route == GoHeapRoute::Runtime ? profiled_
                      : c.route == GoHeapRoute::Calls ? sampled_
                                                      : unsampled_;
  std::string why = c.route == GoHeapRoute::Calls ? ": " + c.why_calls : "";
  if (++counted.count <= kNamed) counted.names.push_back(file.shown + " (" + version + why + ")");
}

// A file without Go's entry points but with its build: a release whose
// heap is not read (before 1.18). Noted when the core finds no allocator.
std::string GoRuntime::unprobed_program(uint32_t kernel_dev, uint64_t ino) const {
  auto go = files_.find({kernel_dev, ino});
  if (go == files_.end()) return "";
  return "a Go program (" + go->second +
         "), whose heap allocscope cannot sample: it reads Go 1.18 and later (their function table and "
         "register ABI)";
}

bool GoRuntime::reads_heap_of(pid_t pid) const {
  auto elf = ElfFile::open("/proc/" + std::to_string(pid) + "/exe");
  return elf && go_build(*elf).has_value();
}

void GoRuntime::set_rate(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                         const std::vector<ProbeTarget>& found, GoHeapChoice& choice) {
  auto profile =
      std::find_if(targets.begin(), targets.end(), [](const ProbeTarget& t) { return t.go_profile; });
  Result<void> set = fail("no runtime.MemProfileRate");
  if (profile != targets.end()) {
    GoRateSite site{file.path, file.ino, profile->go_profile->rate, profile->go_linked_out_switch};
    if (settings_.system_wide && !site.linked_out_switch) {
      // A process caught at its exec would have the rate put back to 0 by its runtime's start.
      set = fail("runtime.disableMemoryProfiling was not found");
    } else if (settings_.system_wide) {
      rate_files_.try_emplace({file.kernel_dev, file.ino}, site);
      if (session_) session_->files().prepare_at_exec(file.kernel_dev, file.ino);
      set_rate_of(file.pid, site);  // one yet to run it is given it at its exec
      return;
    } else {
      set = rates_.set(file.pid, site, settings_.rate, now_ms());
    }
  }
  if (set) return;
  targets = found;
  choice = pick_go_heap(targets, settings_.rate, true, false);
  choice.why_calls = "its MemProfileRate (0) could not be set: " + set.error().message;
}

void GoRuntime::on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino) {
  auto site = rate_files_.find({kernel_dev, ino});
  if (site == rate_files_.end()) return;
  if (session_)
    session_->files().prepare_at_exec(kernel_dev,
                                      ino);  // again: the kernel's table of files forgets the oldest
  set_rate_of(pid, site->second);
}

void GoRuntime::set_rate_of(pid_t pid, const GoRateSite& site) {
  auto set = rates_.set(pid, site, settings_.rate, now_ms());
  // ESRCH: it runs another program (a launched command before its exec), or ended.
  if (set || set.error().code == ESRCH || !process_exists(pid)) return;
  if (++rates_refused_ <= kNamed)
    std::fprintf(stderr, "allocscope: warning: process %d (%s): its Go heap is not read: %s\n", int(pid),
                 read_comm(pid).c_str(), set.error().message.c_str());
}

void GoRuntime::on_process(pid_t pid) {
  if (session_) return;  // with BPF, its files tell (on_probed)
  std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  struct stat st {};
  if (stat(exe.c_str(), &st) != 0 || seen_.contains({st.st_dev, st.st_ino})) return;
  if (seen_.size() >= kMaxRemembered) seen_.clear();
  seen_.insert({st.st_dev, st.st_ino});
  auto elf = ElfFile::open(exe);
  std::optional<GoBuild> go = elf ? go_build(*elf) : std::nullopt;
  if (go && ++unread_without_bpf_.count <= kNamed)
    unread_without_bpf_.names.push_back(read_comm(pid) + " (" + release_of(*go) + ")");
}

GoRuntime::Programs GoRuntime::unsampled_by_runtime() const {
  Programs quiet;
  for (const auto& [key, program] : runtimes_)
    if (session_ && calls_of(program.second) == 0 && ++quiet.count <= kNamed)
      quiet.names.push_back(program.first);
  return quiet;
}

std::vector<std::string> GoRuntime::probed_heaps() const {
  if (profiled_.count || sampled_.count) return {"Go's heap"};
  return {};
}

void GoRuntime::add_counters(KernelCounters kernel,
                             std::vector<std::pair<std::string, uint64_t>>& out) const {
  if (!session_) return;
  out.insert(out.end(), {{"go_programs", unsampled_.count},
                         {"go_programs_sampled", sampled_.count},
                         {"go_programs_profiled", profiled_.count},
                         {"go_programs_profiled_quiet", unsampled_by_runtime().count},
                         {"go_samples_other_rate", kernel[AS_CNT_GO_RATE]}});
}

std::vector<std::string> GoRuntime::warnings(KernelCounters kernel) const {
  std::vector<std::string> out;
  if (uint64_t n = unread_without_bpf_.count)
    out.push_back(std::to_string(n) +
                  " Go program(s) ran: without BPF their heap (runtime.mallocgc) is not read, only their C "
                  "allocations (cgo): " +
                  joined(unread_without_bpf_.names, n));
  if (!session_) return out;
  if (unsampled_.count)
    out.push_back(
        "warning: " + std::to_string(unsampled_.count) +
        " Go program(s) ran whose heap was not sampled (Go allocates from its own heap, "
        "runtime.mallocgc; " +
        (off_ ? "--no-go-heap left it unprobed" : "allocscope reads Go 1.18 and later") +
        "): only their C allocations (cgo) are recorded: " + joined(unsampled_.names, unsampled_.count));
  if (profiled_.count)
    out.push_back("note: " + std::to_string(profiled_.count) +
                  " Go program(s) ran, their heap read from their runtime's own sampling (MemProfileRate): "
                  "allocated and in use, as of their last collection: " +
                  joined(profiled_.names, profiled_.count));
  if (Programs quiet = unsampled_by_runtime(); quiet.count)
    out.push_back("note: " + std::to_string(quiet.count) +
                  " of them had no block sampled by their runtime: each allocated less than about 512 KiB, "
                  "or its MemProfileRate was 0 (GODEBUG=memprofilerate=0, or set so by the program; "
                  "--go-heap-calls samples every call): " +
                  joined(quiet.names, quiet.count));
  if (sampled_.count)
    out.push_back("note: " + std::to_string(sampled_.count) +
                  " Go program(s) ran, their heap sampled at runtime.mallocgc: allocated bytes and objects "
                  "only, in use not measured: " +
                  joined(sampled_.names, sampled_.count));
  if (kernel[AS_CNT_GO_RATE])
    out.push_back("warning: " + std::to_string(kernel[AS_CNT_GO_RATE]) +
                  " blocks Go runtimes sampled at a MemProfileRate their program set (not 512 KiB; 0 stops "
                  "their sampling) were not counted: record such programs with --go-heap-calls");
  return out;
}

std::unique_ptr<Runtime> make_go_runtime(const RuntimeServices& services) {
  return std::make_unique<GoRuntime>(services.settings, services.session);
}

}  // namespace allocscope
