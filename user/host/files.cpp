#include "host/files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "base/units.h"

namespace allocscope {
namespace {

// The `size` bytes fstat saw, or fewer if the file shrank meanwhile.
Result<std::string> read_all(int fd, size_t size, const std::string& path) {
  std::string out(size, '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::pread(fd, out.data() + got, out.size() - got, off_t(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_errno("read " + path, errno);
    if (n == 0) break;
    got += size_t(n);
  }
  out.resize(got);
  return out;
}

// `path` opened in process `pid`'s root: every link on the way, absolute
// ones too, resolves inside it; the last component is not followed.
Result<UniqueFd> open_in_root(pid_t pid, const std::string& path, int flags) {
  UniqueFd root(::open(("/proc/" + std::to_string(pid) + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail_errno("open the root of process " + std::to_string(pid), errno);
  open_how how{};
  how.flags = uint64_t(flags | O_NOFOLLOW | O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  size_t start = path.find_first_not_of('/');
  std::string relative = start == std::string::npos ? "." : path.substr(start);
  UniqueFd fd(int(::syscall(SYS_openat2, root.get(), relative.c_str(), &how, sizeof how)));
  if (!fd) return fail_errno("open " + path + " in the root of process " + std::to_string(pid), errno);
  return fd;
}

// `path` opened with `flags` (never blocking on a FIFO), in process
// `root_of`'s root if not 0, if it is a regular file of at most
// `max_bytes`; `st` is what fstat saw.
Result<UniqueFd> open_regular(const std::string& path, int flags, uint64_t max_bytes, struct stat& st,
                              pid_t root_of = 0) {
  UniqueFd fd;
  if (root_of) {
    auto in_root = open_in_root(root_of, path, flags);
    if (!in_root) return fail(in_root.error());
    fd = std::move(*in_root);
  } else {
    fd = UniqueFd(::open(path.c_str(), flags | O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return fail_errno("open " + path, errno);
  }
  if (::fstat(fd.get(), &st) != 0) return fail_errno("stat " + path, errno);
  if (!S_ISREG(st.st_mode)) return fail("read " + path + ": not a regular file", EINVAL);
  if (uint64_t(st.st_size) > max_bytes)
    return fail("read " + path + ": larger than " + format_bytes(double(max_bytes)), EFBIG);
  return fd;
}

}  // namespace

Result<std::string> read_regular_file(const std::string& path, size_t max_bytes) {
  struct stat st;
  auto fd = open_regular(path, 0, max_bytes, st);
  if (!fd) return fail(fd.error());
  return read_all(fd->get(), size_t(st.st_size), path);
}

Result<OwnedFile> read_file_owned_by(const std::string& path, uid_t owner, size_t max_bytes, pid_t root_of,
                                     int64_t unless_size) {
  struct stat st;
  auto fd = open_regular(path, O_NOFOLLOW, max_bytes, st, root_of);
  if (!fd) return fail(fd.error());
  if (st.st_size == unless_size) return fail("read " + path + ": unchanged", EALREADY);
  if (st.st_uid != 0 && st.st_uid != owner)
    return fail("read " + path + ": owned by user " + std::to_string(st.st_uid) + ", neither root nor " +
                    std::to_string(owner),
                EPERM);
  auto text = read_all(fd->get(), size_t(st.st_size), path);
  if (!text) return fail(text.error());
  return OwnedFile{std::move(*text), st.st_size, st.st_mtime};
}

Result<UniqueFd> open_binary(const std::string& path, const FileIdentity* identity) {
  struct stat st;
  auto fd = open_regular(path, identity ? O_NOFOLLOW : 0, kMaxBinaryBytes, st);
  if (!fd) return fail(fd.error());
  if (identity && (major(st.st_dev) != identity->dev_major || minor(st.st_dev) != identity->dev_minor ||
                   st.st_ino != identity->inode))
    return fail("read " + path + ": no longer the file that was mapped", ESTALE);
  return fd;
}

}  // namespace allocscope
