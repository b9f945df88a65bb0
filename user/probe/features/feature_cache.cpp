#include "probe/features/feature_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

namespace allocscope {
namespace {

constexpr const char* kHeader = "allocscope kernel features 2";
constexpr const char* kFileName = "kernel-features";
constexpr size_t kMaxCacheBytes = 64 << 10;

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

const FeatureSpec* spec_named(const std::string& key) {
  for (const FeatureSpec& s : feature_specs())
    if (key == s.key) return &s;
  return nullptr;
}

// Safe to trust: root's, not a symlink, writable by root alone.
bool owned_by_root_alone(const struct stat& st) { return st.st_uid == 0 && (st.st_mode & 022) == 0; }

Result<UniqueFd> open_cache_dir(const std::string& dir, bool create) {
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return fail_errno("mkdir " + dir, errno);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail_errno("open " + dir, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail_errno("stat " + dir, errno);
  if (!owned_by_root_alone(st)) return fail(dir + ": not root's alone", EPERM);
  return fd;
}

}  // namespace

std::string encode_features(const KernelFeatures& k, const std::string& key) {
  std::ostringstream out;
  out << kHeader << "\nkey " << one_line(key) << "\nrelease " << one_line(k.release)
      << "\nsession_kfunc_takes_ctx " << (k.session_kfunc_takes_ctx ? 1 : 0) << "\ntrap_ns " << k.trap_ns
      << " " << k.stepped_trap_ns << "\n";
  for (const FeatureSpec& s : feature_specs()) {
    const FeatureState& st = k.state(s.feature);
    out << s.key << (st.presence == Presence::Present ? " present" : " missing");
    if (!st.detail.empty()) out << " " << one_line(st.detail);
    out << "\n";
  }
  return out.str();
}

std::optional<KernelFeatures> decode_features(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return std::nullopt;
  if (!std::getline(in, line) || line != "key " + one_line(key)) return std::nullopt;
  KernelFeatures k;
  if (!std::getline(in, line) || line.rfind("release ", 0) != 0) return std::nullopt;
  k.release = line.substr(8);
  if (!std::getline(in, line) || line.rfind("session_kfunc_takes_ctx ", 0) != 0) return std::nullopt;
  k.session_kfunc_takes_ctx = line.substr(24) == "1";
  if (!std::getline(in, line) || line.rfind("trap_ns ", 0) != 0) return std::nullopt;
  std::istringstream(line.substr(8)) >> k.trap_ns >> k.stepped_trap_ns;
  std::array<bool, kFeatureCount> seen{};
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name, presence;
    words >> name >> presence;
    const FeatureSpec* s = spec_named(name);
    if (!s || (presence != "present" && presence != "missing")) return std::nullopt;
    std::string detail;
    std::getline(words >> std::ws, detail);
    k.states[size_t(s->feature)] = {presence == "present" ? Presence::Present : Presence::Missing, detail, 0};
    seen[size_t(s->feature)] = true;
  }
  if (!std::all_of(seen.begin(), seen.end(), [](bool b) { return b; })) return std::nullopt;
  return k;
}

Result<std::string> feature_cache_key() {
  std::string boot;  // procfs files have no size: read as a stream
  if (!std::getline(std::ifstream("/proc/sys/kernel/random/boot_id"), boot) || boot.empty())
    return fail("read /proc/sys/kernel/random/boot_id", ENOENT);
  struct stat exe;
  if (::stat("/proc/self/exe", &exe) != 0) return fail_errno("stat /proc/self/exe", errno);
  std::ostringstream key;
  key << "boot " << boot << " exe " << exe.st_dev << ":" << exe.st_ino << " " << exe.st_size << " "
      << exe.st_mtim.tv_sec << "." << exe.st_mtim.tv_nsec;
  return key.str();
}

std::optional<KernelFeatures> load_cached_features(const std::string& dir, const std::string& key) {
  auto dirfd = open_cache_dir(dir, false);
  if (!dirfd) return std::nullopt;
  UniqueFd fd(::openat(dirfd->get(), kFileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !owned_by_root_alone(st) ||
      size_t(st.st_size) > kMaxCacheBytes)
    return std::nullopt;
  std::string text(size_t(st.st_size), '\0');
  if (::pread(fd.get(), text.data(), text.size(), 0) != ssize_t(text.size())) return std::nullopt;
  return decode_features(text, key);
}

Result<void> store_cached_features(const std::string& dir, const std::string& key, const KernelFeatures& k) {
  if (::geteuid() != 0) return fail("only root keeps the kernel's features", EPERM);
  for (const FeatureState& s : k.states)
    if (s.presence == Presence::Unknown) return fail("a feature is unknown: not kept", EINVAL);
  auto dirfd = open_cache_dir(dir, true);
  if (!dirfd) return fail(dirfd.error());
  // A name of our own in a directory only root writes, then renamed over.
  std::string tmp = std::string(kFileName) + "." + std::to_string(::getpid());
  UniqueFd fd(
      ::openat(dirfd->get(), tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return fail_errno("create " + dir + "/" + tmp, errno);
  std::string text = encode_features(k, key);
  bool written = ::write(fd.get(), text.data(), text.size()) == ssize_t(text.size());
  fd.reset();
  if (!written || ::renameat(dirfd->get(), tmp.c_str(), dirfd->get(), kFileName) != 0) {
    int err = errno;
    ::unlinkat(dirfd->get(), tmp.c_str(), 0);
    return fail_errno("write " + dir + "/" + kFileName, err);
  }
  return {};
}

}  // namespace allocscope
