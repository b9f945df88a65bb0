#include "host/preload_library.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "host/privileges.h"

#ifndef ALLOCSCOPE_PRELOAD_INSTALLED
#define ALLOCSCOPE_PRELOAD_INSTALLED "/usr/lib/allocscope/liballocscope-preload.so"
#endif

namespace allocscope {
namespace {

constexpr const char* kName = "liballocscope-preload.so";

Result<void> check_trusted(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return fail_errno(path, errno);
  if (!S_ISREG(st.st_mode)) return fail(path + ": not a regular file", EINVAL);
  // Root of a user namespace other than the first is a mapped user: it runs
  // nothing as root, and the real root's files show another owner there.
  if (geteuid() == 0 &&
      ((in_initial_user_namespace() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH))))
    return fail(path +
                    ": owned by another user than root or writable by others; as root, allocscope loads "
                    "only a preload library that no other user can change",
                EPERM);
  return {};
}

}  // namespace

bool is_injected_copy(std::string_view mapped_path) {
  return mapped_path.starts_with(std::string("/memfd:") + kInjectedCopyName);
}

bool is_allocscope_library(std::string_view mapped_path) {
  std::string_view base = mapped_path.substr(mapped_path.rfind('/') + 1);
  return base.starts_with("liballocscope-preload") || is_injected_copy(mapped_path);
}

Result<std::string> find_preload_library() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> candidates;
  if (!ec) candidates.push_back((exe.parent_path() / kName).string());
  candidates.push_back(ALLOCSCOPE_PRELOAD_INSTALLED);
  for (const std::string& c : candidates) {
    if (access(c.c_str(), F_OK) != 0) continue;
    if (auto ok = check_trusted(c); !ok) return fail(ok.error());
    return c;
  }
  return fail(std::string(kName) + " not found (looked in " + candidates.front() +
                  (candidates.size() > 1 ? " and " + candidates.back() : "") + ")",
              ENOENT);
}

std::vector<std::string> preload_environment(const std::vector<std::string>& environment,
                                             const std::string& library, uint64_t rate) {
  std::vector<std::string> out;
  std::string preload = "LD_PRELOAD=" + library;
  for (const std::string& e : environment) {
    if (e.starts_with("LD_PRELOAD=")) {
      std::string rest = e.substr(sizeof "LD_PRELOAD=" - 1);
      if (!rest.empty()) preload += ":" + rest;
    } else if (!e.starts_with("ALLOCSCOPE_RATE=") && !e.starts_with("ALLOCSCOPE_SOCKET=") &&
               !e.starts_with("ALLOCSCOPE_FREES_SOCKET=")) {  // ours, not an outer one's
      out.push_back(e);
    }
  }
  out.push_back(preload);
  out.push_back("ALLOCSCOPE_RATE=" + std::to_string(rate <= 1 ? 1 : rate));
  return out;
}

}  // namespace allocscope
