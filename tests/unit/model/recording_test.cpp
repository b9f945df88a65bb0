// The Recording's own rules, apart from any output.
#include "model/recording.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

// libc (the allocator's library, made first), python3.11, libpython, and
// each stack's outermost frames: Python's (no file) above the program's.
Recording python_recording() {
  Recording r;
  r.mappings = {{0x7f0000, 0x7f8000, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", ""},
                {0x400000, 0x500000, 0, "/usr/bin/python3.11", ""},
                {0x7e0000, 0x7e8000, 0, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", ""}};
  r.functions = {
      {"malloc", "malloc", ""}, {"_start", "_start", ""}, {"site", "", "app.py"}, {"PyList_New", "", ""}};
  r.locations = {{0, 0x7f0010, {{0, 0}}},   // malloc
                 {1, 0x400010, {{1, 0}}},   // _start
                 {-1, 0, {{2, 3}}},         // a Python frame
                 {2, 0x7e0010, {{3, 0}}}};  // libpython
  r.samples = {RecSample{{0, 3, 2, 1}, 1, "python3", {}, {}}, RecSample{{0, 3, 2}, 1, "python3", {}, {}},
               RecSample{{0, 1}, 1, "python3", {}, {}}};
  return r;
}

TEST(ProgramFirst, TheProgramsFileGoesFirstAndLocationsFollow) {
  Recording r = python_recording();
  put_program_first(r);
  EXPECT_EQ(r.mappings[0].file, "/usr/bin/python3.11");
  EXPECT_EQ(r.mappings[1].file, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(r.locations[0].mapping, 1);  // malloc: libc, wherever it went
  EXPECT_EQ(r.locations[1].mapping, 0);
  EXPECT_EQ(r.locations[2].mapping, -1);
  EXPECT_EQ(r.locations[3].mapping, 2);
}

// Stacks whose outermost frame of a file is a shared library's (cut short
// under a Python frame) do not choose.
TEST(ProgramFirst, SharedLibrariesNeverGoFirst) {
  Recording r = python_recording();
  r.samples = {r.samples[1]};  // without _start: libpython's frame is the outermost of a file
  put_program_first(r);
  EXPECT_EQ(r.mappings[0].file, "/usr/lib/x86_64-linux-gnu/libc.so.6");
}

// A program already first stays first, though another file roots a stack.
TEST(ProgramFirst, AProgramAlreadyFirstStays) {
  Recording r = python_recording();
  put_program_first(r);
  r.mappings.push_back({0x900000, 0x901000, 0, "/opt/app/helper", ""});
  r.locations.push_back({3, 0x900010, {{1, 0}}});
  r.samples.push_back(RecSample{{0, 4}, 2, "helper", {}, {}});
  put_program_first(r);
  EXPECT_EQ(r.mappings[0].file, "/usr/bin/python3.11");
}

Recording spanning(int64_t start_s, int64_t seconds) {
  Recording r;
  r.time_nanos = start_s * 1'000'000'000;
  r.duration_nanos = seconds * 1'000'000'000;
  return r;
}

// record --interval's profiles follow each other, the agent's share a
// start; three recordings made a minute apart are neither.
TEST(Series, OneRecordingsProfilesFollowEachOtherAndOthersBreak) {
  EXPECT_EQ(series_break({spanning(100, 30), spanning(130, 30), spanning(161, 30)}), "");  // a write's second
  EXPECT_EQ(series_break({spanning(100, 30), spanning(100, 60), spanning(100, 90)}), "");  // cumulative
  size_t at = 0;
  EXPECT_EQ(series_break({spanning(100, 2), spanning(160, 2), spanning(220, 2)}, &at),
            "starts 58.0 s after the one before it ended");
  EXPECT_EQ(at, 1u);
  EXPECT_EQ(series_break({spanning(100, 30), spanning(120, 30)}, &at),
            "starts 10.0 s before the one before it ended");
  std::vector<Recording> shuffled{spanning(200, 10), spanning(100, 10), spanning(150, 10)};
  EXPECT_EQ(end_order(shuffled), (std::vector<size_t>{1, 2, 0}));
}

// Two recordings made back to back follow each other in time, but their
// profiles carry different ids; copies of one profile span the same time.
TEST(Series, AnotherRecordingsProfileOrACopyBreaksIt) {
  auto of = [](int64_t start_s, int64_t seconds, uint64_t id) {
    Recording r = spanning(start_s, seconds);
    r.counters = {{"samples", 5}, {"recording_id", id}};
    return r;
  };
  EXPECT_EQ(series_break({of(100, 2, 7), of(102, 2, 7), of(104, 2, 7)}), "");
  EXPECT_EQ(series_break({of(100, 2, 7), of(102, 2, 7), spanning(104, 2)}), "");  // one without: by time
  size_t at = 0;
  EXPECT_EQ(series_break({of(100, 2, 7), of(102, 2, 7), of(104, 2, 8)}, &at),
            "is another recording's than the one before it");
  EXPECT_EQ(at, 2u);
  EXPECT_EQ(series_break({of(100, 1, 7), of(100, 1, 7)}, &at),
            "spans the very time of the one before it, as a copy does");
  EXPECT_EQ(at, 1u);
  EXPECT_EQ(series_break({spanning(100, 1), spanning(100, 1), spanning(100, 1)}, &at),
            "spans the very time of the one before it, as a copy does");
  EXPECT_EQ(series_break({Recording{}, Recording{}}), "");  // no times (another tool's): not copies
  EXPECT_EQ(recording_id(of(1, 1, 42)), 42u);
  EXPECT_EQ(recording_id(spanning(1, 1)), std::nullopt);
}

}  // namespace
}  // namespace allocscope
