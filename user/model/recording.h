// A recording, symbolized: what every output format is written from, and
// what `allocscope report` reads back from a saved pprof file. Shaped like
// pprof's profile.proto; references are 0-based indices into the vectors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/profile.h"

namespace allocscope {

struct RecMapping {
  uint64_t start = 0, limit = 0, offset = 0;  // runtime address range, file offset of start
  std::string file;                           // path as the process saw it
  std::string build_id;                       // hex, "" when unknown
};

struct RecFunction {
  std::string name;         // demangled
  std::string system_name;  // as in the symbol table (mangled)
  std::string filename;     // source file, "" when unknown
};

struct RecLine {
  uint32_t function = 0;  // index into Recording::functions
  int64_t line = 0;       // 0 when unknown
};

struct RecLocation {
  int32_t mapping = -1;        // index into Recording::mappings, -1 for none
  uint64_t address = 0;        // runtime instruction address
  std::vector<RecLine> lines;  // several: inlined calls, innermost first, caller last
};

struct RecSample {
  std::vector<uint32_t> locations;  // indices into Recording::locations, leaf first;
                                    // the leaf is the allocator entry point called
  uint32_t pid = 0;
  std::string comm;
  StackTotals totals;  // unbiased estimates and sample counts
  // More string labels naming the process (the agent's unit, container,
  // pod, host), in pprof's sample labels.
  std::vector<std::pair<std::string, std::string>> labels;
  uint32_t ns_pid = 0;  // pid in the process's own PID namespace, when it differs
  // The recording's process instance (ProcessTable id) it came from, while
  // it runs: how the agent labels it. Not written to files.
  uint32_t instance = UINT32_MAX;
};

// The path a recording made without probing frees (--no-free) carries,
// under "frees": it has no in-use figures.
inline constexpr const char* kFreesNotProbed = "not probed (--no-free): no in-use figures";
// The path ("taken") of a profile written after the traced programs ended:
// its in-use figures are what they held at exit, not what they held while
// they ran (a program that frees everything before it exits shows none).
inline constexpr const char* kTakenAfterExit =
    "after the traced programs ended (in use: what they held at exit)";

struct Recording {
  uint64_t rate = 0;       // mean bytes between samples; 1 = exact
  int64_t time_nanos = 0;  // wall-clock start, ns since the epoch
  int64_t duration_nanos = 0;
  Metric default_metric = Metric::AllocSpace;
  std::vector<std::pair<std::string, uint64_t>> counters;  // named counters (samples, drops)
  // How the kernel recorded it (what `allocscope check` calls paths): the
  // kernel's release, the probes, the unwinder, each fallback taken.
  std::vector<std::pair<std::string, std::string>> paths;
  // What pprof viewers leave out (profile.proto's drop_frames), as a file
  // read said it; unset: the allocator entry points, each sample's leaf.
  std::optional<std::string> drop_frames;
  std::vector<RecMapping> mappings;
  std::vector<RecFunction> functions;
  std::vector<RecLocation> locations;
  std::vector<RecSample> samples;
};

// Frame names of a sample, root first: "comm (pid)" ("comm" for pid 0:
// processes merged by name), callers outermost
// first (inlined frames expanded), the allocator last. With `lines`, each
// frame whose position is known reads "function (file:line)", the file as
// DWARF recorded it (often an absolute path), "?" for an unknown file or
// line.
std::vector<std::string> frame_names(const Recording& r, const RecSample& s, bool lines = false);
// The innermost function of the program's own code in `s` (report --by
// code): an interpreter's or VM's function (a frame of no file: Python's,
// Java's) where the stack has one, else the innermost caller of the
// allocator outside Go's runtime (runtime.*), which in a C program is its
// direct caller, else (only the runtime's own or unnamed callers) the direct
// caller; nullopt for a stack of the allocator alone.
std::optional<uint32_t> code_function(const Recording& r, const RecSample& s);

// The number one recording's profiles all carry (counter "recording_id").
std::optional<uint64_t> recording_id(const Recording& r);

// Why `series` (sorted by end) is not one recording's series: "" when it
// is cumulative, or each profile starts where the one before it ended (an
// interval's write may take a moment: up to 5 s or half the earlier
// interval later; never more than 1 s earlier), no two carry different
// recording ids and no two span the same time (copies). Else which two do
// not follow each other, by their index.
std::string series_break(const std::vector<Recording>& series, size_t* at = nullptr);

// pprof takes the first mapping for the program's own (go tool pprof prints
// it as "File:"), yet the first one made is the allocator's library. The
// program is the file, not a shared library, that holds the most samples'
// outermost frames of a file (_start, main; a runtime's frames have none):
// it goes first.
void put_program_first(Recording& r);

// A series of profiles of one recording, ordered by the moment each ends
// (the order files are named in need not be).
void sort_by_end(std::vector<Recording>& series);
// The indices of `series` in that order.
std::vector<size_t> end_order(const std::vector<Recording>& series);
// Whether each profile holds everything since one start (the agent's /heap,
// fetched now and then: one start, growing durations) rather than its own
// interval alone (record --interval: each its own start).
bool is_cumulative(const std::vector<Recording>& series);

}  // namespace allocscope
