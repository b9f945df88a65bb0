#include "inject/breakpoints.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/unique_fd.h"

namespace allocscope::inject {
namespace {

constexpr uint8_t kInt3 = 0xcc;

std::string read_all(int fd) {
  std::string s;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) s.append(buf, size_t(n));
  return s;
}

}  // namespace

std::vector<std::pair<uint64_t, uint8_t>> site_addresses(const std::vector<Mapping>& maps,
                                                         std::span<const ProbedFile> files) {
  std::vector<std::pair<uint64_t, uint8_t>> out;
  for (const Mapping& m : maps) {
    if (!m.executable || !m.is_file()) continue;
    for (const ProbedFile& f : files) {
      if (f.inode != m.inode || f.dev_major != m.dev_major || f.dev_minor != m.dev_minor) continue;
      for (const auto& [offset, original] : f.sites)
        if (offset >= m.offset && offset - m.offset < m.end - m.start)
          out.emplace_back(m.start + (offset - m.offset), original);
    }
  }
  return out;
}

Result<size_t> lift_breakpoints(pid_t pid, std::span<const ProbedFile> files,
                                std::span<const Mapping> kernel_named, pid_t traced) {
  // Its maps and memory opened through one directory of /proc: both are of
  // this process, even if it ends and its id is taken meanwhile.
  std::string name = "process " + std::to_string(pid);
  UniqueFd dir(::open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return fail_errno("open /proc of " + name, errno);
  UniqueFd maps(::openat(dir.get(), "maps", O_RDONLY | O_CLOEXEC));
  if (!maps) return fail_errno("read the mappings of " + name, errno);
  std::vector<Mapping> mappings = parse_maps(read_all(maps.get()));
  mappings.insert(mappings.end(), kernel_named.begin(), kernel_named.end());
  auto sites = site_addresses(mappings, files);
  std::sort(sites.begin(), sites.end());
  sites.erase(std::unique(sites.begin(), sites.end()), sites.end());
  if (sites.empty()) return size_t(0);
  // Written as a debugger writes: into the process's private copy of a
  // read-only code page, the copy the kernel made for its int3.
  std::string file = traced ? "task/" + std::to_string(traced) + "/mem" : "mem";
  UniqueFd mem(::openat(dir.get(), file.c_str(), O_RDWR | O_CLOEXEC));
  if (!mem) return fail_errno("open the memory of " + name, errno);
  size_t lifted = 0;
  for (const auto& [addr, original] : sites) {
    uint8_t now = 0;
    if (original == kInt3 || ::pread(mem.get(), &now, 1, off_t(addr)) != 1 || now != kInt3) continue;
    if (::pwrite(mem.get(), &original, 1, off_t(addr)) == 1)
      ++lifted;
    else if (errno == EIO && !traced)
      return fail_errno("the kernel writes into the code of " + name + " only for its tracer", EIO);
  }
  return lifted;
}

}  // namespace allocscope::inject
