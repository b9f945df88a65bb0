#include "record/discovery/library_discovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "base/clocks.h"
#include "host/process.h"
#include "inject/injector.h"
#include "probe/features/kernel_features.h"
#include "probe/placement/allocator_entries.h"
#include "probe/placement/allocator_probes.h"
#include "probe/placement/usdt_notes.h"
#include "record/messages.h"
#include "record/scope.h"
#include "runtime/registry.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

constexpr size_t kMaxRemembered = 1 << 16;  // files known to be no allocator

void print_placement(const std::string& path, const std::vector<ProbeTarget>& targets, ProbeMode mode) {
  std::fprintf(stderr, "allocscope: %s probes in %s:\n", probe_mode_name(mode), path.c_str());
  for (const ProbeTarget& t : targets)
    std::fprintf(stderr, "  %-28s +%-3llu %-24s %s\n", entry_name(t.fn).c_str(),
                 (unsigned long long)t.placed_at, t.instruction.c_str(),
                 t.emulated ? "emulated" : "single-stepped");
}

// The distinct files a process maps executable, in address order.
std::vector<const Mapping*> code_files(const std::vector<Mapping>& maps) {
  std::vector<const Mapping*> files;
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> seen;
  for (const Mapping& m : maps)
    if (m.executable && m.is_file() && seen.insert({m.dev_major, m.dev_minor, m.inode}).second)
      files.push_back(&m);
  return files;
}

}  // namespace

LibraryDiscovery::LibraryDiscovery(const RecordConfig& config, InProcessUse use, BpfSession& session,
                                   Symbolizer& symbolizer, Runtimes& runtimes)
    : session_(session),
      symbolizer_(symbolizer),
      runtimes_(runtimes),
      system_wide_(system_wide(config)),
      naive_placement_(config.naive_placement),
      verbose_(config.verbose),
      use_(use),
      max_files_(config.max_allocator_files) {
  // allocscope's own allocator (linked in) is never probed: it records nothing.
  struct stat st;
  if (stat("/proc/self/exe", &st) == 0) own_executable_ = file_key(st);
}

LibraryDiscovery::FileKey LibraryDiscovery::file_key(const Mapping& m) {
  return {(uint64_t(m.dev_major) << 32) | m.dev_minor, m.inode};
}

// The same key for a file found by path.
LibraryDiscovery::FileKey LibraryDiscovery::file_key(const struct stat& st) {
  return {(uint64_t(major(st.st_dev)) << 32) | minor(st.st_dev), st.st_ino};
}

// The kernel's encoding of a device number (major << 20 | minor).
LibraryDiscovery::FileKey LibraryDiscovery::file_key(uint32_t kernel_dev, uint64_t ino) {
  return {(uint64_t(kernel_dev >> 20) << 32) | (kernel_dev & 0xfffff), ino};
}

uint32_t LibraryDiscovery::kernel_dev(const FileKey& key) {
  return uint32_t((key.first >> 32) << 20 | (key.first & 0xfffff));
}

// Probes the allocator in mapping `m` of process `pid`: in that process
// alone, or (system-wide) in every process, once per file.
Result<bool> LibraryDiscovery::attach_file(pid_t pid, const Mapping& m) {
  return attach_file(pid, file_key(m), mapped_file_path(pid, m), m.path);
}

// The file behind `path` (a mapping of process `pid`), held open: read and
// attached through /proc/self/fd/N, a name that stays valid once that
// process has exited or exec'd (the kernel's probes go by inode).
Result<UniqueFd> LibraryDiscovery::hold(pid_t pid, const std::string& path, const std::string& shown) {
  UniqueFd file(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (file) return file;
  int err = errno;
  if (err == ENOENT && pid > 0 && !process_exists(pid))
    return fail(shown + ": process " + std::to_string(pid) + " exited before the file could be opened", err);
  return fail_errno("open " + shown, err);
}

std::string LibraryDiscovery::held_path(const UniqueFd& file) {
  return "/proc/self/fd/" + std::to_string(file.get());
}

Result<bool> LibraryDiscovery::attach_file(pid_t pid, FileKey key, const std::string& path,
                                           const std::string& shown, bool assume_in_process) {
  if (not_allocators_.contains(key) || key == own_executable_) return false;
  // A copy an earlier recording entered and left, dormant: its process
  // allocates through its own allocator again, which is probed.
  if (inject::is_injected_library(shown)) return false;
  if (system_wide_ && allocator_offsets_.contains(key)) return true;
  if (deferred_.contains(key) && defers_for(pid, assume_in_process)) return true;
  auto file = hold(pid, path, shown);
  if (!file) return fail(file.error());
  auto probed = attach_held(pid, key, held_path(*file), shown, assume_in_process);
  if (probed && *probed && !held_files_.contains(key)) held_files_.emplace(key, std::move(*file));
  return probed;
}

// The file as ELF, opened when first asked for: a file whose notes and
// symbols were read before is not opened again, and one read now is opened
// once for both.
class LibraryDiscovery::LazyElf {
 public:
  explicit LazyElf(const std::string& path) : path_(path) {}
  const Result<ElfFile>& get() {
    if (!file_) file_.emplace(ElfFile::open(path_));
    return *file_;
  }

 private:
  const std::string& path_;
  std::optional<Result<ElfFile>> file_;
};

Result<bool> LibraryDiscovery::attach_held(pid_t pid, FileKey key, const std::string& path,
                                           const std::string& shown, bool assume_in_process) {
  LazyElf elf(path);
  if (auto in_process = attach_in_process(pid, key, path, shown, elf); !in_process || *in_process)
    return in_process;
  if (use_ == InProcessUse::Only) {
    not_allocators_.insert(key);
    return false;
  }
  // A file probed before (held open, so its inode is not reused) is read
  // once: per-process attach meets it in each process, and a Go program's
  // tables take a while to read.
  auto known = probed_targets_.find(key);
  Result<std::vector<ProbeTarget>> targets = fail("not read");
  if (known != probed_targets_.end())
    targets = known->second;
  else if (const Result<ElfFile>& file = elf.get(); !file)
    targets = fail(file.error());
  else
    targets = find_allocator_probes(*file, naive_placement_, shown, emulation_of(session_.kernel()),
                                    runtime_entry_finders());
  std::vector<ProbeTarget> found = targets ? *targets : std::vector<ProbeTarget>{};
  ProbedFile file{pid, kernel_dev(key), key.second, path, shown, [&elf]() -> const ElfFile* {
                    const Result<ElfFile>& f = elf.get();
                    return f ? &*f : nullptr;
                  }};
  HeapRoute route;
  if (targets) route = runtimes_.choose_targets(file, *targets, found);
  if (targets && targets->empty()) targets = fail(shown + ": " + route.unprobed, Cause::NoAllocator);
  // A runtime's heap is never sampled in process: its probes wait for nothing.
  if (targets && !route.probed && defers_for(pid, assume_in_process)) {
    // Probed once a process that samples no other way maps it: the kernel
    // reports that mapping again (and holds its process until then).
    if (auto ok = session_.files().defer(kernel_dev(key), key.second); !ok) return fail(ok.error());
    bool first = deferred_.insert(key).second;
    if (verbose_ && first)
      std::fprintf(stderr, "allocscope: %s is left to in-process sampling until a process needs its probes\n",
                   shown.c_str());
    return true;
  }
  if (targets && allocator_offsets_.size() >= max_files_) {
    // Bounded: under --all any user can bring new allocator files (copies
    // of libc). Counted as not probed, and said once.
    miss(shown, "over --max-allocator-files");
    not_allocators_.insert(key);  // asked about once
    if (!warned_full_)
      print_error("warning: " + std::to_string(max_files_) + " allocator files are probed; " + shown +
                  " and any later ones are not (raise --max-allocator-files)");
    warned_full_ = true;
    return false;
  }
  Cause cause = targets ? Cause::Other : targets.error().cause;
  if (cause == Cause::NoAllocator || cause == Cause::NotElf) {
    // No allocator (or no ELF: JIT code in a memfd). Remembered so that its
    // symbols are read once; bounded, by forgetting (a file is read again).
    if (not_allocators_.size() >= kMaxRemembered) not_allocators_.clear();
    not_allocators_.insert(key);
    if (cause == Cause::NoAllocator) runtimes_.on_probed(file, {});
    return false;
  }
  if (!targets) return fail(targets.error());
  if (verbose_) print_placement(shown, *targets, session_.mode());
  auto attached = session_.attach(system_wide_ ? 0 : pid, path, *targets);
  if (!attached) return fail(attached.error());
  if (deferred_.erase(key)) {
    session_.files().know(kernel_dev(key), key.second);
    if (verbose_)
      std::fprintf(stderr, "allocscope: probing %s: process %d (%s) does not sample in process\n",
                   shown.c_str(), pid, read_comm(pid).c_str());
  }
  auto& entries = allocator_offsets_[key];
  // Every entry found, attached or not: a runtime's own samples are named at
  // its allocator's entry (Go's at runtime.mallocgc) whichever way they came;
  // an entry code's first (Go 1.27's allocators specialized by size share
  // mallocgc's: their samples are named there too).
  for (const ProbeTarget& t : found) entries.try_emplace(t.fn, t.offset - t.placed_at);
  runtimes_.on_probed(file, *targets);
  probed_targets_.try_emplace(key, std::move(found));  // bounded as the files probed are
  return true;
}

bool LibraryDiscovery::samples_in_process(pid_t pid) const {
  auto maps = read_maps(pid);
  if (!maps) return false;
  for (const Mapping* m : code_files(*maps)) {
    if (inject::is_injected_library(m->path)) continue;
    auto elf = ElfFile::open(mapped_file_path(pid, *m));
    if (elf && has_in_process_probes(*elf)) return true;
  }
  return false;
}

Result<void> LibraryDiscovery::attach_process(pid_t pid, bool entered) {
  auto maps = read_maps(pid);
  if (!maps) {
    if (!process_exists(pid)) return fail("process " + std::to_string(pid) + " exited during attach");
    return fail(maps.error());
  }
  std::string searched;
  size_t probed = 0;
  // A process that samples in process is traced through that alone: the
  // allocator behind it would count its allocations twice.
  std::vector<const Mapping*> files = code_files(*maps);
  std::erase_if(files,
                [entered](const Mapping* m) { return !entered && inject::is_injected_library(m->path); });
  for (const Mapping* m : files) {
    auto file = hold(pid, mapped_file_path(pid, *m), m->path);
    if (!file) return fail(file.error());
    std::string path = held_path(*file);
    LazyElf elf(path);
    auto ok = attach_in_process(pid, file_key(*m), path, m->path, elf);
    if (!ok) return fail(ok.error());
    if (*ok && !held_files_.contains(file_key(*m))) held_files_.emplace(file_key(*m), std::move(*file));
    probed += *ok;
  }
  if (probed) return {};
  for (const Mapping* m : files) {
    auto ok = attach_file(pid, *m);
    if (!ok) return fail(ok.error());
    probed += *ok;
    searched += (searched.empty() ? "" : ", ") + m->path;
  }
  std::string runtime_why =
      files.size() == 1
          ? runtimes_.unprobed_program(kernel_dev(file_key(*files.front())), files.front()->inode)
          : "";
  if (!probed && !runtime_why.empty())
    return fail("process " + std::to_string(pid) + " (" + read_comm(pid) + ") is " + runtime_why);
  if (!probed)
    return fail("process " + std::to_string(pid) + " (" + read_comm(pid) +
                ") maps no allocator allocscope knows (looked for malloc, mallocx, je_malloc, tc_malloc and "
                "mi_malloc in the symbols of " +
                (searched.empty() ? std::string("no file") : searched) +
                "); a stripped static binary has no symbols to find them by");
  return {};
}

Result<bool> LibraryDiscovery::attach_in_process(pid_t pid, FileKey key, const std::string& path,
                                                 const std::string& shown, LazyElf& elf) {
  if (system_wide_ && in_process_files_.contains(key)) {  // attached once, for every process
    if (pid > 0)
      if (auto ok = session_.processes().mark_in_process(uint32_t(pid)); !ok) return fail(ok.error());
    return true;
  }
  if (no_in_process_probes_.contains(key)) return false;
  if (const Result<ElfFile>& file = elf.get(); !file || !has_in_process_probes(*file)) {
    // Not ELF: find_allocator_probes says so.
    // Remembered so that its notes are read once; bounded, by forgetting.
    if (no_in_process_probes_.size() >= kMaxRemembered) no_in_process_probes_.clear();
    no_in_process_probes_.insert(key);
    return false;
  }
  if (system_wide_) {
    // Its processes are left to it by the allocator probes: those that
    // map it from now on by the kernel, this one here.
    if (auto ok = session_.files().add_in_process(kernel_dev(key), key.second); !ok) return fail(ok.error());
    if (pid > 0)
      if (auto ok = session_.processes().mark_in_process(uint32_t(pid)); !ok) return fail(ok.error());
  }
  auto provider = session_.attach_in_process(system_wide_ ? 0 : pid, path);
  if (!provider) return fail(provider.error());
  in_process_files_.insert(key);
  if (verbose_)
    std::fprintf(stderr, "allocscope: in-process sampling probes (%s) in %s\n", *provider, shown.c_str());
  return true;
}

bool LibraryDiscovery::defers_for(pid_t pid, bool assume_in_process) const {
  return use_ == InProcessUse::Preferred &&
         (assume_in_process || session_.processes().in_process(uint32_t(pid)));
}

void LibraryDiscovery::attach_paths(pid_t pid, const std::vector<std::string>& paths, bool in_process) {
  for (const std::string& path : paths) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (auto ok = attach_file(pid, file_key(st), path, path, in_process); !ok)
      print_error("warning: " + ok.error().message);
  }
}

Result<void> LibraryDiscovery::attach_every_process() {
  for (pid_t pid : list_processes()) {
    if (pid == getpid()) continue;
    auto maps = read_maps(pid);  // kernel threads and the just exited have none
    if (!maps) continue;
    for (const Mapping* m : code_files(*maps)) {
      if (allocator_offsets_.contains(file_key(*m)) || not_allocators_.contains(file_key(*m))) continue;
      if (auto ok = attach_file(pid, *m); !ok) {
        // Ended while the machine was read, before recording began: nothing
        // of it is missed, and its files are examined when others map them.
        if (!process_exists(pid)) break;
        miss(m->path, ok.error().message);
        not_allocators_.insert(file_key(*m));  // warned once
        print_error("warning: " + ok.error().message);
      }
    }
  }
  if (allocator_offsets_.empty()) return fail("no allocator could be probed (see the warnings above)");
  return {};
}

void LibraryDiscovery::new_library(const as_proc_event& e) {
  std::string name(e.name, strnlen(e.name, sizeof(e.name)));
  pending_.push_back({e.tgid, e.addr, file_key(e.dev, e.ino), e.dev, now_ms() + 1000, e.ts_ns, name});
  retry_pending(now_ms());
}

void LibraryDiscovery::on_exec(uint32_t tgid) {
  // What the kernel mapped itself shows no mmap: the program (a static
  // binary's own malloc) and its interpreter (musl's C library).
  if (!system_wide_) return;
  auto maps = read_maps(pid_t(tgid));  // the new program's, not what the symbolizer saw before
  if (!maps) return;
  std::vector<const Mapping*> files = code_files(*maps);

  if (files.size() == 1) {  // no interpreter: a static program, whose allocator is its own or none
    auto ok = attach_file(pid_t(tgid), *files.front());
    if (!ok) print_error("warning: " + ok.error().message);
    if (ok && !*ok &&
        runtimes_.unprobed_program(kernel_dev(file_key(*files.front())), files.front()->inode).empty() &&
        ++without_allocator_ <= 3)
      without_allocator_names_.push_back(files.front()->path);
    return;
  }
  // (A deferred allocator that it maps is reported by the kernel when it
  // does not sample in process.)
  for (const Mapping* m : files)
    if (!allocator_offsets_.contains(file_key(*m)) && !not_allocators_.contains(file_key(*m)) &&
        !deferred_.contains(file_key(*m)))
      pending_.push_back({tgid, m->start, file_key(*m), 0, now_ms() + 1000, monotonic_ns(), m->path});
  retry_pending(now_ms());  // while the process lives (and, if new, is held)
}

void LibraryDiscovery::retry_pending(uint64_t now) {
  std::erase_if(pending_, [&](const PendingLibrary& p) { return settle(p, now); });
}

bool LibraryDiscovery::settle(const PendingLibrary& p, uint64_t now) {
  if (allocator_offsets_.contains(p.key) || not_allocators_.contains(p.key)) return true;
  auto maps = read_maps(pid_t(p.tgid));
  if (maps)
    for (const Mapping& m : *maps)
      // By address: /proc names an overlayfs file by the overlay's inode,
      // the kernel's vma by the backing file's.
      if (m.executable && (p.addr ? m.start <= p.addr && p.addr < m.end : file_key(m) == p.key)) {
        if (!allocator_offsets_.contains(file_key(m)) && !not_allocators_.contains(file_key(m)))
          attach_pending(p, m);
        return true;
      }
  if (maps && now < p.deadline_ms) return false;  // not mapped yet: the loader is on it
  // Gone before we could read where: the next process to map it tells again.
  give_up(p, maps ? "never shown in /proc/" + std::to_string(p.tgid) + "/maps"
                  : "process " + std::to_string(p.tgid) + " ended before its mappings could be read");
  return true;
}

void LibraryDiscovery::attach_pending(const PendingLibrary& p, const Mapping& m) {
  auto ok = attach_file(pid_t(p.tgid), m);
  if (!ok) {
    give_up(p, ok.error().message);
    print_error("warning: " + ok.error().message);
  } else if (*ok && verbose_ && allocator_offsets_.contains(file_key(m))) {  // the gap: allocations not seen
    std::fprintf(stderr,
                 "allocscope: probing %s, a new allocator (process %u), %.1f ms after it was mapped\n",
                 m.path.c_str(), p.tgid, (monotonic_ns() - p.mapped_ns) / 1e6);
  }
}

void LibraryDiscovery::give_up(const PendingLibrary& p, const std::string& why) {
  miss(p.name, why);
  if (p.kernel_dev) session_.files().forget(p.kernel_dev, p.key.second);
}

void LibraryDiscovery::miss(const std::string& name, const std::string& why) {
  ++libraries_missed_;
  if (missed_names_.size() < kMissedNamed) missed_names_.push_back(name + " (" + why + ")");
}

uint64_t LibraryDiscovery::allocator_address(uint32_t tgid, int fn) {
  for (const Mapping& m : symbolizer_.maps(pid_t(tgid))) {
    auto lib = allocator_offsets_.find(file_key(m));
    if (!m.executable || lib == allocator_offsets_.end()) continue;
    auto entry = lib->second.find(uint16_t(fn));
    if (entry == lib->second.end()) continue;
    uint64_t off = entry->second;
    if (off >= m.offset && off < m.offset + (m.end - m.start)) return m.start + (off - m.offset);
  }
  return 0;
}

}  // namespace allocscope
