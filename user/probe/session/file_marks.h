// What the kernel knows of files (kernel device encoding and inode): those
// examined, deferred to in-process sampling, prepared at exec (the
// known_files map), and those whose processes sample in process
// (in_process_files). The session's handle over those maps.
#pragma once

#include <cstdint>

#include "base/result.h"

namespace allocscope {

class FileMarks {
 public:
  FileMarks(int known_files, int in_process_files) : known_(known_files), in_process_(in_process_files) {}

  // A C library file the kernel reported (AS_EV_MMAP) but that could not be
  // probed: reported again the next time a process maps it.
  void forget(uint32_t kernel_dev, uint64_t ino);
  // An allocator left unprobed while its processes sample in process: the
  // kernel reports (and holds) the next process that maps it and does not.
  Result<void> defer(uint32_t kernel_dev, uint64_t ino);
  // Examined: nothing more to report.
  void know(uint32_t kernel_dev, uint64_t ino);
  // A program each process is held for at its exec (if it can be), until
  // userspace has prepared it (released as any hold).
  void prepare_at_exec(uint32_t kernel_dev, uint64_t ino);
  // System-wide: processes that map or run this file sample in process,
  // and allocator probes leave them alone.
  Result<void> add_in_process(uint32_t kernel_dev, uint64_t ino);

 private:
  int known_, in_process_;
};

}  // namespace allocscope
