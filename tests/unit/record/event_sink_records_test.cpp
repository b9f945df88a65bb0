// Records fed to the sink as the BPF program writes them: the stacks that
// samples name, and each process's life (verdicts, exec, holds, exit, lost events).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "event_sink_fixture.h"
#include "record/events/event_sink.h"

namespace allocscope {
namespace {

TEST(EventSink, SamplesNameTheirStackByIdAndCutStacksEndTruncated) {
  Fixture f;
  EXPECT_TRUE(f.sink(bytes(stack_event(7, f.tgid, {0x1000, 0x2000}, AS_STOP_COMPLETE))));
  EXPECT_TRUE(f.sink(bytes(stack_event(8, f.tgid, {0x1000}, AS_STOP_BAD_FRAME))));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x20, 100)));
  f.sink(bytes(alloc_event(8, f.tgid, 0x30, 100)));
  ASSERT_EQ(f.profile.stacks().size(), 2u);
  EXPECT_EQ(f.profile.stacks()[0].ips, (std::vector<uint64_t>{0x1000, 0x2000}));
  EXPECT_EQ(f.profile.stacks()[0].totals.samples, 2u);
  EXPECT_EQ(f.profile.stacks()[1].ips, (std::vector<uint64_t>{0x1000, kTruncatedFrame}));
  EXPECT_EQ(f.sink.stacks_truncated(), 1u);
  EXPECT_EQ(f.sink.origins().size(), 2u);
}

// An entry's attach runs on a thread of the program, inside allocscope's
// copy of its library: what it allocates is allocscope's. The library's
// allocator wrappers, innermost, are the program's calls: they go. The copy
// here is this process's own memory file of that name.
TEST(EventSink, CallsFromAllocscopesLibraryBecomeOneFrameAndItsWrappersGo) {
  Fixture f;
  f.tgid = uint32_t(getpid());
  f.symbolizer.track(getpid());  // seen before the copy was mapped, as an entered process is
  int fd = memfd_create("allocscope-preload", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  void* copy = mmap(nullptr, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  ASSERT_NE(copy, MAP_FAILED);
  close(fd);
  auto own = reinterpret_cast<uint64_t>(copy);
  // Inner to outer: the C library (its loader's lookup), the library twice,
  // then the program that was interrupted.
  uint64_t libc = reinterpret_cast<uint64_t>(&::getpid) + 1,
           program = reinterpret_cast<uint64_t>(&bytes<int>) + 1;
  f.sink(bytes(stack_event(7, f.tgid, {libc, own + 0x10, own + 0x20, program}, AS_STOP_COMPLETE)));
  f.sink(bytes(stack_event(8, f.tgid, {libc, program}, AS_STOP_COMPLETE)));
  f.sink(bytes(stack_event(9, f.tgid, {own + 0x30, program}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  f.sink(bytes(alloc_event(8, f.tgid, 0x20, 100)));
  f.sink(bytes(alloc_event(9, f.tgid, 0x30, 100)));
  munmap(copy, 8192);
  ASSERT_EQ(f.profile.stacks().size(), 3u);
  const std::vector<uint64_t>& folded = f.profile.stacks()[0].ips;
  ASSERT_EQ(folded.size(), 2u);
  EXPECT_EQ(folded[1], program);
  EXPECT_EQ(f.symbolizer.describe(Symbolizer::kNoMapping, folded[0]).function, "[allocscope]");
  EXPECT_EQ(f.sink.origins()[0].mappings[0], Symbolizer::kNoMapping);
  EXPECT_EQ(f.profile.stacks()[1].ips, (std::vector<uint64_t>{libc, program}));  // no frame of it: as it was
  EXPECT_EQ(f.profile.stacks()[2].ips, std::vector<uint64_t>{program});
}

TEST(EventSink, SampleOfAStackNeverReceivedIsCountedLost) {
  Fixture f;
  f.sink(bytes(alloc_event(99, f.tgid, 0x10, 123)));
  EXPECT_EQ(f.sink.stack_lost(), 1u);
  EXPECT_EQ(f.sink.stack_lost_bytes(), 123u);
  EXPECT_TRUE(f.profile.stacks().empty());
}

TEST(EventSink, ARejectedProcessIsToldOnceAndItsSamplesLeaveTheKernel) {
  Fixture f;
  f.verdicts.only = "other";
  f.sink(bytes(stack_event(7, f.tgid, {0x1000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x20, 100)));
  EXPECT_EQ(f.verdicts.rejected, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.kernel.forgotten_live, (std::vector<uint64_t>{0x10, 0x20}));
  EXPECT_TRUE(f.profile.stacks().empty());
  EXPECT_EQ(f.sink.stack_lost(), 0u);
  f.sink(bytes(process_event(AS_EV_EXIT, f.tgid)));
  EXPECT_EQ(f.verdicts.unrejected, (std::vector<uint32_t>{f.tgid}));
}

// The program an exec ran is handed to the unwind tables at once (they hold
// it open while the process may still be there to open it through); its
// files are examined only when the kernel saw its file for the first time
// (a start of a known program costs it no read of its /proc).
TEST(EventSink, ExecHandsTheNewProgramToTheTables) {
  Fixture f;
  as_proc_event e = process_event(AS_EV_EXEC, f.tgid);
  e.dev = (8 << 20) | 1;
  e.ino = 4242;
  f.sink(bytes(e));
  EXPECT_EQ(f.unwind.execs,
            (std::vector<std::tuple<uint32_t, uint32_t, uint64_t>>{{f.tgid, (8 << 20) | 1, 4242}}));
  EXPECT_TRUE(f.libraries.examined.empty());
  e.fresh = 1;
  f.sink(bytes(e));
  EXPECT_EQ(f.libraries.examined, (std::vector<uint32_t>{f.tgid}));
}

// A process the kernel stopped at a new mapping goes on only after the file
// was handed to discovery and its tables are in (built later); one not held
// is left alone.
TEST(EventSink, AHeldProcessIsPreparedThenReleased) {
  Fixture f;
  as_proc_event e = process_event(AS_EV_MMAP, f.tgid);
  e.held = 1;
  e.hold = 77;
  f.sink(bytes(e));
  EXPECT_EQ(f.libraries.mapped, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.unwind.prepared, (std::vector<uint32_t>{f.tgid}));
  EXPECT_TRUE(f.kernel.released.empty());  // its tables are still being built
  ASSERT_EQ(f.unwind.continuations.size(), 1u);
  f.unwind.continuations[0]();
  EXPECT_EQ(f.kernel.released, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.kernel.released_stamps, (std::vector<uint64_t>{77}));  // this hold, not a later one
  e.held = 0;
  e.hold = 0;
  f.sink(bytes(e));
  EXPECT_EQ(f.libraries.mapped.size(), 2u);
  EXPECT_EQ(f.kernel.released.size(), 1u);
  EXPECT_EQ(f.unwind.prepared.size(), 1u);
}

// A CPython process held at _exit goes on when its event is read (its
// stacks before it were read first), by that hold's stamp.
TEST(EventSink, AProcessHeldAtExitGoesOnAtItsEvent) {
  Fixture f;
  as_proc_event e = process_event(AS_EV_EXITING, f.tgid);
  e.held = 1;
  e.hold = 99;
  f.sink(bytes(e));
  EXPECT_EQ(f.kernel.released, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.kernel.released_stamps, (std::vector<uint64_t>{99}));
  e.held = 0;
  f.sink(bytes(e));
  EXPECT_EQ(f.kernel.released.size(), 1u);
}

// A program held at its exec as a file not seen before: examined, prepared,
// then let go, if the filter may sample it; let go at once, unexamined, its
// file unmarked so that the next process that may be sampled is held for
// it, if its name rules it out (a filter's other programs are never stopped
// for its tables).
TEST(EventSink, AHeldProgramTheFilterRulesOutGoesOnAtOnce) {
  Fixture f;
  f.verdicts.only = "wanted";
  as_proc_event e = process_event(AS_EV_EXEC, f.tgid);
  e.held = e.fresh = 1;
  e.dev = (8 << 20) | 1;
  e.ino = 4242;
  std::memcpy(e.comm, "other", 6);
  f.sink(bytes(e));
  EXPECT_EQ(f.kernel.released, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.kernel.forgotten_files, (std::vector<std::pair<uint32_t, uint64_t>>{{(8 << 20) | 1, 4242}}));
  EXPECT_TRUE(f.unwind.prepared.empty());
  EXPECT_TRUE(f.unwind.execs.empty());
  EXPECT_TRUE(f.libraries.examined.empty());

  std::memcpy(e.comm, "wanted", 7);
  f.sink(bytes(e));
  EXPECT_EQ(f.unwind.prepared, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.unwind.execs.size(), 1u);
  EXPECT_EQ(f.libraries.examined, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.kernel.released.size(), 1u);  // its tables are still being built
  ASSERT_EQ(f.unwind.continuations.size(), 1u);
  f.unwind.continuations[0]();
  EXPECT_EQ(f.kernel.released.size(), 2u);
  EXPECT_EQ(f.kernel.forgotten_files.size(), 1u);
}

// A program the kernel ruled out (outside --cgroup, or of a name rejected
// before) was not held and will not be sampled: the program it replaced
// ends, its live addresses leaving the kernel, and nothing of the new one
// is judged or examined (no tables built for a process never recorded).
TEST(EventSink, AProgramTheKernelRulesOutEndsTheOldOneAndIsNotExamined) {
  Fixture f;
  f.sink(bytes(stack_event(7, f.tgid, {0x1000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  as_proc_event e = process_event(AS_EV_EXEC, f.tgid);
  e.ruled_out = 1;
  e.dev = (8 << 20) | 1;
  e.ino = 4242;
  f.sink(bytes(e));
  EXPECT_EQ(f.kernel.forgotten_live, (std::vector<uint64_t>{0x10}));
  EXPECT_TRUE(f.verdicts.judged.empty());
  EXPECT_TRUE(f.libraries.examined.empty());
  EXPECT_TRUE(f.unwind.execs.empty());
  EXPECT_TRUE(f.unwind.prepared.empty());
  EXPECT_TRUE(f.kernel.released.empty());
  EXPECT_TRUE(f.kernel.forgotten_files.empty());

  e.ruled_out = 0;  // the same program, not ruled out (and new): judged and examined
  e.fresh = 1;
  f.sink(bytes(e));
  EXPECT_EQ(f.verdicts.judged, (std::vector<std::string>{"worker"}));
  EXPECT_EQ(f.libraries.examined, (std::vector<uint32_t>{f.tgid}));
  EXPECT_EQ(f.unwind.execs.size(), 1u);
}

TEST(EventSink, AProcessThatExitsFreesWhatItHeldInTheKernel) {
  Fixture f;
  f.sink(bytes(stack_event(7, f.tgid, {0x1000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(7, f.tgid, 0x10, 100)));
  EXPECT_TRUE(f.kernel.forgotten_live.empty());
  f.sink(bytes(process_event(AS_EV_EXIT, f.tgid)));
  EXPECT_EQ(f.kernel.forgotten_live, (std::vector<uint64_t>{0x10}));
}

// An exit event the full ring buffer lost leaves its process running here:
// found gone at two checks in a row, it ends as an exit would end it. Gone
// once is not enough (its exit may be on its way), an exit read between the
// checks ends it once, a process still there stays, and a new program in
// the same process starts the count again. Once every event is read, gone
// once is enough.
TEST(EventSink, AProcessGoneWithoutItsExitEventEndsAtTheSecondCheck) {
  Fixture f;
  uint32_t lost = f.tgid, exited = f.tgid + 1, running = f.tgid + 2, execed = f.tgid + 3;
  for (uint32_t t : {lost, exited, running, execed}) {
    f.sink(bytes(stack_event(t, t, {0x1000}, AS_STOP_COMPLETE)));
    f.sink(bytes(alloc_event(t, t, 0x10 + (t - lost), 100)));
  }
  auto alive = [&](uint32_t t) { return t == running; };
  EXPECT_EQ(f.sink.end_vanished(alive), 0u) << "gone once: its exit may not have been read yet";
  EXPECT_EQ(f.sink.processes().running(), 4u);
  f.sink(bytes(process_event(AS_EV_EXIT, exited)));
  f.sink(bytes(process_event(AS_EV_EXEC, execed)));
  f.sink(bytes(stack_event(99, execed, {0x1000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(99, execed, 0x99, 100)));
  EXPECT_EQ(f.sink.end_vanished(alive), 1u);
  EXPECT_FALSE(f.sink.processes().find(lost));
  EXPECT_TRUE(f.sink.processes().find(running));
  EXPECT_TRUE(f.sink.processes().find(execed)) << "its new program was found gone once only";
  std::vector<uint64_t> gone_live = f.kernel.forgotten_live;
  std::sort(gone_live.begin(), gone_live.end());
  EXPECT_EQ(gone_live, (std::vector<uint64_t>{0x10, 0x11, 0x13})) << "as at an exit, and exec, each";
  EXPECT_EQ(f.sink.end_vanished(alive), 1u);
  EXPECT_FALSE(f.sink.processes().find(execed));
  EXPECT_EQ(f.sink.ended_unseen(), 2u);
  EXPECT_EQ(f.sink.processes().running(), 1u);
  EXPECT_EQ(f.sink.end_vanished(alive), 0u);
  // At the end every event is read: gone once is gone.
  f.sink(bytes(stack_event(100, lost, {0x1000}, AS_STOP_COMPLETE)));
  f.sink(bytes(alloc_event(100, lost, 0x100, 100)));
  EXPECT_EQ(f.sink.end_vanished(alive, true), 1u);
  EXPECT_EQ(f.sink.processes().running(), 1u);
}

// A program whose exec event was lost (the ring buffer was full) ends at the
// first stack of the program that replaced it, as its exec would have ended
// it; a later process given its pid (its exit lost) ends it as an exit.
// Stacks of the same program, or of an earlier one, change nothing.
TEST(EventSink, AStackOfALaterProgramEndsTheOneWhoseExecOrExitWasLost) {
  Fixture f;
  auto stack = [&](uint64_t id, uint64_t start_ns, uint64_t exec_id, const char* comm) {
    as_stack_event e = stack_event(id, f.tgid, {0x1000}, AS_STOP_COMPLETE);
    e.start_ns = start_ns;
    e.exec_id = exec_id;
    std::strcpy(e.comm, comm);
    f.sink(bytes(e));
    return f.sink.processes().find(f.tgid).value_or(UINT32_MAX);
  };
  uint32_t shell = stack(1, 100, 5, "sh");
  f.sink(bytes(alloc_event(1, f.tgid, 0x10, 100)));
  EXPECT_EQ(stack(2, 100, 5, "sh"), shell);
  EXPECT_EQ(stack(3, 100, 4, "sh"), shell) << "no stack of an earlier program follows its exec";
  EXPECT_EQ(f.sink.ended_by_stacks(), 0u);

  uint32_t compiler = stack(4, 100, 6, "cc1");
  EXPECT_NE(compiler, shell);
  EXPECT_EQ(f.sink.processes().instance(compiler).comm, "cc1");
  EXPECT_TRUE(f.sink.processes().instance(shell).ended);
  EXPECT_EQ(f.kernel.forgotten_live, (std::vector<uint64_t>{0x10})) << "the replaced program's memory goes";
  EXPECT_EQ(f.libraries.examined, (std::vector<uint32_t>{f.tgid})) << "the new program is looked at";
  f.sink(bytes(alloc_event(4, f.tgid, 0x20, 100)));
  ASSERT_EQ(f.profile.stacks().size(), 2u);
  EXPECT_EQ(f.profile.stacks()[0].pid, shell);
  EXPECT_EQ(f.profile.stacks()[1].pid, compiler);

  uint32_t server = stack(5, 200, 1, "server");
  EXPECT_NE(server, compiler);
  EXPECT_TRUE(f.sink.processes().instance(compiler).ended);
  EXPECT_EQ(f.libraries.examined.size(), 1u) << "a process that exited ran no new program";
  EXPECT_EQ(f.sink.ended_by_stacks(), 2u);
  EXPECT_EQ(f.sink.processes().running(), 1u);
}

}  // namespace
}  // namespace allocscope
