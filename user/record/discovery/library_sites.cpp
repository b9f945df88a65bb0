// LibraryDiscovery's side of the processes entered under system-wide
// probes: the probes of the library loaded into each, and the sites of the
// allocators' probes, which each takes out of its copy of their code.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "base/unique_fd.h"
#include "host/process.h"
#include "record/discovery/library_discovery.h"

namespace allocscope {
namespace {

// Whether an entered process's calls reach the probe of entry code `fn`:
// the allocator's entry points do (forwarded by the library); the exit
// probe and a Go runtime's (never entered) are left in.
bool forwarded(uint16_t fn) {
  auto kind = as_fn_kind(fn);
  return kind <= AS_FN_FREE;
}

}  // namespace

Result<void> LibraryDiscovery::attach_entered(pid_t pid, int library) {
  struct stat st {};
  UniqueFd held(::fcntl(library, F_DUPFD_CLOEXEC, 0));
  if (!held || ::fstat(held.get(), &st) != 0) return fail_errno("hold the library entered", errno);
  FileKey key = file_key(st);
  // Attached for every process that maps it: the process and its forks,
  // which carry its mark. Neither marked here (the caller marks it as late
  // as it can) nor one of the kernel's in-process files (a table of 256,
  // and no other process maps or runs this copy).
  auto provider = session_.attach_in_process(system_wide_ ? 0 : pid, held_path(held), true);
  if (!provider) return fail(provider.error());
  if (verbose_)
    std::fprintf(stderr,
                 "allocscope: in-process sampling probes (%s) in allocscope's library in process %d\n",
                 *provider, int(pid));
  in_process_files_.insert(key);
  held_files_.try_emplace(key, std::move(held));
  leave_copy(pid);  // a copy it mapped before (its exec's event lost)
  copy_users_[key].insert(pid);
  copy_of_[pid] = key;
  return {};
}

void LibraryDiscovery::on_fork(uint32_t parent, uint32_t child) {
  auto copy = copy_of_.find(pid_t(parent));
  if (copy == copy_of_.end()) return;
  copy_users_[copy->second].insert(pid_t(child));
  copy_of_[pid_t(child)] = copy->second;
}

void LibraryDiscovery::on_program_end(uint32_t tgid) { leave_copy(pid_t(tgid)); }

void LibraryDiscovery::leave_copy(pid_t pid) {
  auto copy = copy_of_.find(pid);
  if (copy == copy_of_.end()) return;
  copy_users_[copy->second].erase(pid);
  copy_of_.erase(copy);
}

void LibraryDiscovery::release_unmapped_copies() {
  std::vector<FileKey> unmapped;
  for (auto& [key, users] : copy_users_) {
    // Their end events may have been lost (a full ring buffer).
    for (auto it = users.begin(); it != users.end();)
      if (process_exists(*it)) {
        ++it;
      } else {
        copy_of_.erase(*it);
        it = users.erase(it);
      }
    if (users.empty()) unmapped.push_back(key);
  }
  std::vector<std::string> paths;
  for (const FileKey& key : unmapped)
    if (auto held = held_files_.find(key); held != held_files_.end())
      paths.push_back(held_path(held->second));
  session_.release_in_process(paths);  // before their files close: the paths name them
  for (const FileKey& key : unmapped) {
    held_files_.erase(key);
    in_process_files_.erase(key);
    copy_users_.erase(key);
  }
}

const std::vector<inject::ProbedFile>& LibraryDiscovery::probed_files() {
  if (!system_wide_) return probed_files_;
  for (const auto& [key, targets] : probed_targets_) {
    // A runtime's program is never entered (its heap is the runtime's).
    if (files_with_sites_.contains(key) || runtimes_.owns_program(kernel_dev(key), key.second)) continue;
    auto held = held_files_.find(key);
    if (held == held_files_.end()) continue;
    files_with_sites_.insert(key);
    UniqueFd file(::open(held_path(held->second).c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) continue;  // its probes stay: each call traps, as before
    inject::ProbedFile f{uint32_t(key.first >> 32), uint32_t(key.first & 0xffffffff), key.second, {}};
    for (const ProbeTarget& t : targets)
      if (uint8_t byte = 0; forwarded(t.fn) && ::pread(file.get(), &byte, 1, off_t(t.offset)) == 1)
        f.sites.emplace_back(t.offset, byte);
    if (!f.sites.empty()) probed_files_.push_back(std::move(f));
  }
  return probed_files_;
}

}  // namespace allocscope
