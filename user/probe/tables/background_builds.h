// Unwind tables built off the thread that reads the ring buffer: reading a
// large program's unwind information takes hundreds of milliseconds (35 MB
// of cc1plus: about 400), during which events must go on being drained.
// A few workers build the files in the order given, each file on its own:
// a small file the kernel asks for is not queued behind a large program's
// whole set. The reader takes what is finished and loads it into the kernel
// itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "allocscope.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "symbols/unwind_table.h"

namespace allocscope {

// A table as built, and how long that took.
struct BuiltTable {
  Result<UnwindTable> table;
  double ms = 0;
};

// Builds the table of the file at `path`, timed (`runtime_tables`: as
// build_unwind_table takes them).
BuiltTable timed_build(const std::string& path, const RuntimeTablesReaders& runtime_tables = {});

struct FinishedBuild {
  as_file_key key;
  std::string path;
  BuiltTable built;
};

class BackgroundBuilds {
 public:
  // A file to build from: `path` to name it by, `file` open (the path of a
  // process's mapping vanishes with the process, which may not wait).
  struct File {
    as_file_key key;
    std::string path;
    UniqueFd file;
  };
  // `finished` is called (on a worker) after each file, to wake the reader.
  explicit BackgroundBuilds(std::function<void()> finished, RuntimeTablesReaders runtime_tables = {})
      : finished_(std::move(finished)), runtime_tables_(std::move(runtime_tables)) {}
  ~BackgroundBuilds();
  BackgroundBuilds(const BackgroundBuilds&) = delete;
  BackgroundBuilds& operator=(const BackgroundBuilds&) = delete;

  // `first`: ahead of those waiting (a file a walk or the kernel asks for:
  // small as a rule, and everything of its process's behind it waits).
  void submit(std::vector<File> files, bool first = false);
  // The builds finished since the last call.
  std::vector<FinishedBuild> take();
  // Whether take() has something (a cheap check, from any thread).
  bool finished() const { return has_done_.load(std::memory_order_relaxed); }

 private:
  void work();

  std::function<void()> finished_;
  const RuntimeTablesReaders runtime_tables_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<File> files_;
  std::vector<FinishedBuild> done_;
  std::atomic<bool> has_done_ = false;  // !done_.empty(), read without the lock
  bool stopping_ = false;
  std::vector<std::thread> workers_;  // started by the first file
};

}  // namespace allocscope
