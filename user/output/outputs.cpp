#include "output/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "base/unique_fd.h"

namespace allocscope {

namespace {

std::optional<std::pair<uid_t, gid_t>> output_owner;

Result<void> write_stdout(std::string_view content) {
  // stdio rather than iostreams: a failed write leaves its errno (ENOSPC on
  // /dev/full, EPIPE on a closed pipe, SIGPIPE being ignored).
  errno = 0;
  size_t n = std::fwrite(content.data(), 1, content.size(), stdout);
  if (n != content.size() || std::fflush(stdout) != 0)
    return fail_errno("write standard output", errno ? errno : EIO);
  return {};
}

Result<void> write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail_errno("write", n < 0 ? errno : EIO);
    content.remove_prefix(size_t(n));
  }
  return {};
}

// The directory holding `path`, synced so that the rename survives a crash.
void sync_directory(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  UniqueFd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d) ::fsync(d.get());
}

// A character device or a FIFO (/dev/null, a named pipe a reader waits on)
// is written in place, as a shell's redirection would: renaming a new file
// over it would replace the device node itself.
Result<void> write_in_place(const std::string& path, std::string_view content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return fail_errno("write " + path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
    return fail("write " + path + ": changed while being opened");
  if (auto ok = write_all(fd.get(), content); !ok)
    return fail("write " + path + ": " + ok.error().message, ok.error().code);
  return {};
}

// What is at `path` now decides how, and where, it is written: nothing or
// a regular file is replaced atomically; a device or a FIFO is written in
// place. A symbolic link made by someone else (planted in a shared
// directory) is replaced, never followed; one of root's or the caller's own
// (/dev/stdout) is followed, as a shell's redirection would.
struct Target {
  bool in_place = false;
  std::string path;
};
Result<Target> target_of(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Target{false, path};
    return fail_errno("write " + path, errno);
  }
  if (S_ISREG(st.st_mode)) return Target{false, path};
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return Target{true, path};
  if (!S_ISLNK(st.st_mode)) return fail("write " + path + ": not a regular file");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) return Target{false, path};
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) return Target{false, path};  // dangling: the link itself is replaced
  if (::stat(real.get(), &st) != 0) return fail_errno("write " + path, errno);
  if (S_ISREG(st.st_mode)) return Target{false, real.get()};
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return Target{true, real.get()};
  return fail("write " + path + ": not a regular file");
}

}  // namespace

Result<void> write_file_atomically(const std::string& path, std::string_view content,
                                   std::optional<unsigned> mode) {
  if (path == "-") return write_stdout(content);
  auto target = target_of(path);
  if (!target) return fail(target.error());
  if (target->in_place) return write_in_place(target->path, content);
  if (target->path != path) return write_file_atomically(target->path, content, mode);
  // A fresh file of our own beside the target (O_EXCL: never a file or a
  // symlink someone planted, whatever its name), renamed over the target:
  // rename replaces a symlink at `path` itself, never what it points to.
  std::string tmp = path + ".XXXXXX";
  UniqueFd fd(mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return fail_errno("write " + path, errno);
  auto remove_tmp = [&] { ::unlink(tmp.c_str()); };
  // mkostemp makes it 0600; others may read it as they could any new file,
  // except as root, whose recordings name other users' code and data.
  if (mode) {
    if (::fchmod(fd.get(), mode_t(*mode & 07777)) != 0) {
      int err = errno;
      remove_tmp();
      return fail_errno("write " + path, err);
    }
  } else if (geteuid() != 0 || output_owner) {
    mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd.get(), 0666 & ~mask);
  }
  if (output_owner && ::fchown(fd.get(), output_owner->first, output_owner->second) != 0) {
    int err = errno;
    remove_tmp();
    return fail_errno("write " + path + ": give it to user " + std::to_string(output_owner->first), err);
  }
  if (auto ok = write_all(fd.get(), content); !ok) {
    remove_tmp();
    return fail("write " + path + ": " + ok.error().message, ok.error().code);
  }
  if (::fsync(fd.get()) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    remove_tmp();
    return fail_errno("write " + path, err);
  }
  sync_directory(path);
  return {};
}

Result<void> check_output(const std::string& path) {
  if (path == "-") return {};
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return fail("write " + path + ": a directory (name a file in it: " + path + "/heap.pb.gz)", EISDIR);
  auto target = target_of(path);
  if (!target) return fail(target.error());
  if (target->in_place) return {};
  std::string tmp = target->path + ".XXXXXX";
  UniqueFd fd(mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return fail_errno("write " + path, errno);
  ::unlink(tmp.c_str());
  return {};
}

void give_outputs_to(unsigned uid, unsigned gid) { output_owner = std::pair{uid_t(uid), gid_t(gid)}; }

std::string unnamed_format_note(const OutputSpec& o) {
  if (o.format != Format::Folded || o.format_chosen || format_named_by(o.path) || o.path == "-" ||
      o.path.starts_with("/dev/"))
    return "";
  return o.path + " is written as folded stacks (its suffix names no format: " + names_of(kFormatSuffixes) +
         ")";
}

bool set_aside_previous(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (st.st_uid != ::geteuid() && !(output_owner && st.st_uid == output_owner->first)) return false;
  return ::rename(path.c_str(), (path + ".old").c_str()) == 0;
}

void put_back_previous(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 || errno != ENOENT) return;
  (void)::rename((path + ".old").c_str(), path.c_str());
}

Result<std::string> save_elsewhere(std::string_view content, const std::string& suffix) {
  const char* tmpdir = std::getenv("TMPDIR");
  Error last{"no directory to save in", ENOENT};
  for (std::string dir :
       {std::string("."), std::string(tmpdir && *tmpdir ? tmpdir : "/tmp"), std::string("/tmp")}) {
    std::string path = dir + "/allocscope-XXXXXX" + suffix;
    UniqueFd fd(mkostemps(path.data(), int(suffix.size()), O_CLOEXEC));
    if (!fd) {
      last = {"save in " + dir + ": " + std::strerror(errno), errno};
      continue;
    }
    if (output_owner) (void)::fchown(fd.get(), output_owner->first, output_owner->second);
    if (auto ok = write_all(fd.get(), content); ok && ::fsync(fd.get()) == 0) return path;
    last = {"save in " + dir + ": " + std::strerror(errno ? errno : EIO), errno ? errno : EIO};
    ::unlink(path.c_str());
  }
  return fail(last);
}

std::string tagged_path(const std::string& path, const std::string& tag) {
  size_t slash = path.rfind('/');
  size_t dot = path.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos || dot == (slash == std::string::npos ? 0 : slash + 1))
    return path + "." + tag;
  return path.substr(0, dot) + "." + tag + path.substr(dot);
}

std::string numbered_path(const std::string& path, unsigned n) {
  return tagged_path(path, std::to_string(n));
}

Result<void> write_outputs(const Recording& r, const std::vector<OutputSpec>& outputs,
                           const RenderOptions& o) {
  return write_outputs(outputs, [&](Format f) { return render(r, f, o); });
}

Result<void> write_outputs(const std::vector<OutputSpec>& outputs,
                           const std::function<Result<std::string>(Format)>& render_as) {
  // One output that fails (a full disk, a closed pipe) does not cost the
  // others; the error names every one that failed, the first's code.
  std::optional<Error> failed;
  for (const OutputSpec& out : outputs) {
    auto text = render_as(out.format);
    Result<void> ok = text ? write_file_atomically(out.path, *text, out.mode)
                           : fail("write " + out.path + ": " + text.error().message, text.error().code);
    if (ok) continue;
    if (!failed)
      failed = ok.error();
    else
      failed->message += "; " + ok.error().message;
  }
  if (failed) return fail(*failed);
  return {};
}

}  // namespace allocscope
