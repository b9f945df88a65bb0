// Files read on a user's behalf, with the checks that keep a FIFO, a device
// or a huge file from hanging allocscope or filling its memory.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allocscope {

// The whole of `path` if it is a regular file of at most `max_bytes`; a FIFO,
// a device or a directory fails at once (EINVAL), a larger file with EFBIG.
Result<std::string> read_regular_file(const std::string& path, size_t max_bytes);

struct OwnedFile {
  std::string text;
  int64_t size = 0;   // as fstat saw it when opened
  int64_t mtime = 0;  // seconds
};

// A file another user may have put in place (/tmp/perf-PID.map): opened
// without following a symlink and without blocking, and read only if it is
// a regular file of at most `max_bytes` owned by root or by `owner` (the
// rule perf applies). EPERM for another owner, ELOOP for a symlink.
// `root_of`: `path` (absolute) as process `root_of` names it, in its root
// (a container's, a chroot's): the links on the way resolve inside that
// root, never out of it (openat2's RESOLVE_IN_ROOT). `unless_size`: not
// read when its size is that (EALREADY): a file seen before, unchanged.
Result<OwnedFile> read_file_owned_by(const std::string& path, uid_t owner, size_t max_bytes,
                                     pid_t root_of = 0, int64_t unless_size = -1);

// A binary a traced process maps, opened to be read as ELF: without
// blocking, and only if it is a regular file of at most kMaxBinaryBytes.
// Through a path of the kernel's (/proc/PID/map_files/..., /proc/PID/root/...)
// the file is the process's own. Through another path (`identity` given: the
// mapping's device and inode), the last component is not followed and the
// file must be that very one: the path may have changed since it was seen.
// Owners are not checked: a command run as root may map any user's binary.
struct FileIdentity {
  uint64_t dev_major = 0, dev_minor = 0, inode = 0;
};
inline constexpr uint64_t kMaxBinaryBytes = uint64_t{16} << 30;
Result<UniqueFd> open_binary(const std::string& path, const FileIdentity* identity = nullptr);

}  // namespace allocscope
