// Unwind tables from the binaries traced processes run, into the kernel
// (or kept here alone when every walk is done in userspace, TableHost):
// before recording for the files a target maps (or, for a command, will
// map), and on demand when the kernel's unwinder meets a file without one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "allocscope.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "host/proc_maps.h"
#include "probe/tables/background_builds.h"
#include "probe/tables/table_host.h"
#include "symbols/stack_walk.h"
#include "symbols/unwind_table.h"

namespace allocscope {

struct TableStats {
  uint64_t files = 0;   // tables loaded
  uint64_t rows = 0;    // their rows
  uint64_t failed = 0;  // files whose table could not be built or loaded
  uint64_t full = 0;    // files refused: the row budget was spent
  double build_ms = 0;  // time spent building and loading
};

// The key the kernel's unwinder uses for a file /proc shows as mapped.
as_file_key file_key_of(const Mapping& m);

class TableLoader {
 public:
  // `runtime_tables`: what builds the rows of a runtime's own code
  // (runtime/registry.h has every runtime's).
  TableLoader(TableHost& session, uint64_t max_rows, bool verbose, RuntimeTablesReaders runtime_tables = {})
      : session_(session),
        max_rows_(max_rows),
        verbose_(verbose),
        runtime_tables_(std::move(runtime_tables)) {}

  // The kernel met this mapping of process `pid` without a table.
  void on_request(pid_t pid, const as_vma& vma);
  // Every executable file a live process maps (those no larger than
  // `max_bytes`: the rest wait for the kernel's request).
  void load_process(pid_t pid, uint64_t max_bytes = UINT64_MAX);
  // The same, built off this thread; `then` runs from collect() once every
  // file of the process has its table in (or could not have one).
  void load_process_later(pid_t pid, uint64_t max_bytes, std::function<void()> then);
  // Loads the tables built since the last call and runs the continuations
  // they complete; returns how many builds finished. On the thread that
  // calls everything else.
  size_t collect();
  // Collects until no build is left or `max_ms` have passed (the end of a
  // recording: walks that wait for tables are finished after it).
  void wait_for_builds(uint64_t max_ms);
  // Whether the table of file `key` is being built.
  bool building(const as_file_key& key) const { return building_.contains({key.ino, key.dev}); }
  // Whether a build finished since the last collect() (any thread may ask).
  bool builds_finished() const { return background_ && background_->finished(); }
  // Collects until file `key`'s table is in (or could not be) or `max_ms`
  // have passed.
  void wait_for(const as_file_key& key, uint64_t max_ms);
  // The processes whose continuation waits for a build.
  std::unordered_set<uint32_t> waiting_processes() const;
  // Files by path (a command's program and libraries, before it runs).
  void load_paths(const std::vector<std::string>& paths);
  // The program a process just ran (exec, file `key`) is held open until its
  // table is in: a short-lived program may be gone before the kernel's
  // request for its table, or its unfinished walks, are read.
  void pin_executable(pid_t pid, const as_file_key& key);

  // The rows of the file behind mapping `m` of process `pid`; nullptr when
  // not in: its build is then started off this thread (unless on its way,
  // or the file could not be read), and building() tells which.
  const std::vector<as_unwind_row>* rows(pid_t pid, const Mapping& m);

  const TableStats& stats() const { return stats_; }

 private:
  using Key = std::tuple<uint64_t, uint32_t>;  // ino, dev
  struct Waiter {
    uint32_t pid;
    std::vector<Key> needs;
    std::function<void()> then;
  };
  bool known(const as_file_key& key) const;
  std::vector<std::pair<as_file_key, std::string>> process_files(pid_t pid, uint64_t max_bytes) const;
  bool build_later(const as_file_key& key, pid_t pid, const Mapping& m);
  void submit(std::vector<BackgroundBuilds::File> files, bool first);
  void collect_while(const std::function<bool()>& pending, uint64_t max_ms);
  void load_all(const std::vector<std::pair<as_file_key, std::string>>& files);
  bool install(const as_file_key& key, const std::string& path, BuiltTable&& built);

  TableHost& session_;
  uint64_t max_rows_;
  bool verbose_;
  const RuntimeTablesReaders runtime_tables_;
  std::map<Key, std::vector<as_unwind_row>> tables_;  // what the kernel holds, for userspace walks
  std::set<Key> failed_;
  std::map<Key, UniqueFd> pinned_;  // at most kMaxPinned, the oldest let go first
  std::deque<Key> pinned_order_;
  TableStats stats_;
  std::unique_ptr<BackgroundBuilds> background_;  // made for the first build off this thread
  std::set<Key> building_;                        // submitted to it, not collected yet
  std::vector<Waiter> waiters_;
};

// The rows of a process's code, for continue_walk: its mappings as given,
// tables as loaded (frame pointers for anonymous code). A file without one
// has no row, and its table is built meanwhile.
class ProcessRows : public RowLookup {
 public:
  ProcessRows(TableLoader& tables, pid_t pid, const std::vector<Mapping>& maps)
      : tables_(tables), pid_(pid), maps_(maps) {}
  std::optional<as_unwind_row> row(uint64_t pc) override;
  // The file whose table, being built, a row was missing for: the walk can
  // be done again once it is in.
  std::optional<as_file_key> waits_for() const { return waits_for_; }

 private:
  TableLoader& tables_;
  pid_t pid_;
  const std::vector<Mapping>& maps_;
  std::optional<as_file_key> waits_for_;
};

// The shared libraries the dynamic loader would map for `program` (asked of
// the system's glibc loader, as ldd does, without running the program);
// empty when that cannot be told (a static or non-glibc program).
std::vector<std::string> shared_libraries(const std::string& program);

}  // namespace allocscope
