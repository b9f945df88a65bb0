// Under system-wide probes (--all, the agent) a process whose allocator
// calls trap too often is entered: allocscope's library loaded into it, and
// the probes' int3s taken out of its copy of the C library, while every
// other process keeps them. Its estimates are the truth's, and nothing of
// the probes is left in any process once the recording ends.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "host/process_memory.h"
#include "symbols/elf_file.h"

namespace allocscope::test {
namespace {

// The C library's allocator entry points whose first bytes the probes change.
constexpr const char* kProbed[] = {"malloc", "free", "calloc", "realloc"};
constexpr size_t kSpan = 48;

// Where process `pid`'s copy of the C library differs from the file in the
// first kSpan bytes of an allocator entry point ("malloc+4: cc, file 41"):
// a probe's int3 is there. "" when nowhere.
std::string probes_in(pid_t pid) {
  auto maps = read_maps(pid);
  if (!maps) return "";
  const Mapping* libc = find_c_library(*maps);
  if (!libc) return "";
  std::string path = mapped_file_path(pid, *libc);
  auto elf = ElfFile::open(path);
  if (!elf) return "";
  std::ifstream file(path, std::ios::binary);
  for (const ElfSymbol& s : elf->functions()) {
    if (std::find(std::begin(kProbed), std::end(kProbed), s.name) == std::end(kProbed)) continue;
    auto offset = elf->vaddr_to_offset(s.vaddr);
    if (!offset || *offset < libc->offset || *offset + kSpan > libc->offset + (libc->end - libc->start))
      continue;
    std::vector<uint8_t> in_process(kSpan), in_file(kSpan);
    if (!read_process_memory(pid, libc->start + (*offset - libc->offset), in_process)) continue;
    file.seekg(std::streamoff(*offset));
    file.read(reinterpret_cast<char*>(in_file.data()), std::streamsize(kSpan));
    if (!file) continue;
    for (size_t i = 0; i < kSpan; ++i)
      if (in_process[i] != in_file[i]) {
        char at[64];
        std::snprintf(at, sizeof at, "%s+%zu: %02x, file %02x", s.name.c_str(), i, in_process[i], in_file[i]);
        return at;
      }
  }
  return "";
}

bool probed(pid_t pid) { return !probes_in(pid).empty(); }

bool eventually(const std::function<bool()>& ok, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!ok()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// alloc_sites churns (malloc and free, outside every site) until it is
// entered, then allocates its sites: each site's allocated and live bytes
// within kMaxZ standard deviations of the truth, 16 checks at 1.8e-7 each
// (harness.h): under 3e-6 a run. An idle process (sleep) keeps its probes
// meanwhile, and neither keeps any after the recording.
TEST(BusyEntry, ABusyProcessIsEnteredByAWholeMachineRecording) {
  REQUIRE_BPF();
  constexpr int kThreads = 2, kScale = 20;
  constexpr double kRate = 64 * 1024;
  Child idle({"sleep", "300"});
  Child target({WORKLOAD_BIN, "--threads", std::to_string(kThreads), "--scale-pct", std::to_string(kScale),
                "--wait", "--churn", "--hold"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  ASSERT_FALSE(probed(target.pid()));
  std::string out = temp_path("busy.pb.gz");
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "-v", "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  std::string maps = "/proc/" + std::to_string(target.pid()) + "/maps";
  ASSERT_TRUE(eventually(
      [&] { return read_file(maps).find("/memfd:allocscope-preload") != std::string::npos; }, 30000))
      << rec.err();
  bool lifted = eventually([&] { return !probed(target.pid()); }, 10000);
  std::string left = probes_in(target.pid());
  EXPECT_TRUE(probed(idle.pid())) << "the probes are system-wide: the idle process has them";
  target.signal(SIGUSR1);
  ASSERT_TRUE(target.wait_for_line("done", 60000));
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(60000), 0) << rec.err();
  EXPECT_TRUE(lifted) << left << "\n" << rec.err();
  std::string said = "process " + std::to_string(target.pid()) + " (alloc_sites) samples in process";
  EXPECT_NE(rec.err().find(said), std::string::npos) << rec.err();
  EXPECT_TRUE(std::regex_search(
      rec.err(), std::regex("sampling: allocator probes, in process where busy \\(\\d+ process")))
      << rec.err();
  EXPECT_FALSE(probed(idle.pid())) << "no probe is left behind";
  EXPECT_FALSE(probed(target.pid()));
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  Recording recording = read_pprof(out);
  std::filesystem::remove(out);
  EXPECT_GT(counter_of(recording, "ring_frees"), 0u) << "the sampled frees came through the ring";
  // Each process entered marked itself (its library's probe): no moment of
  // its entry was left to neither the probes nor the library.
  std::smatch entered;
  ASSERT_TRUE(std::regex_search(rec.err(), entered, std::regex("in process where busy \\((\\d+) process")));
  EXPECT_EQ(counter_of(recording, "entries_marked_by_library"), std::stoull(entered[1].str()));
  auto sites = site_totals(recording);
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, kScale);
    const StackTotals& got = sites[s.function];
    double sd = ht_sigma(t.objects, double(s.size), kRate, true) + 1;
    EXPECT_LT(std::fabs(got.alloc_bytes - t.bytes) / sd, kMaxZ)
        << s.function << " alloc " << got.alloc_bytes << " truth " << t.bytes;
    double live_sd = ht_sigma(t.live_objects, double(s.size), kRate, true) + 1;
    EXPECT_LT(std::fabs(got.live_bytes - t.live_bytes) / live_sd, kMaxZ)
        << s.function << " live " << got.live_bytes << " truth " << t.live_bytes;
  }
  // Its own words (entries, holds, drops) tell a lost window from a bias.
  if (HasFailure()) ADD_FAILURE() << "the recording said:\n" << rec.err();
}

// The inode of the copy of allocscope's library that process `pid` maps; 0
// when none.
uint64_t entered_copy(pid_t pid) {
  auto maps = read_maps(pid);
  if (maps)
    for (const Mapping& m : *maps)
      if (m.path.find("/memfd:allocscope-preload") != std::string::npos) return m.inode;
  return 0;
}

// Whether process `pid` holds a descriptor of the file with inode `inode`.
bool holds_inode(pid_t pid, uint64_t inode) {
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    struct stat st {};
    if (::stat(fd.path().c_str(), &st) == 0 && st.st_ino == inode) return true;
  }
  return false;
}

// The ids of the BPF links process `pid` holds (each probe has one: a
// uprobe_multi link, or a perf event's).
std::set<uint64_t> link_ids(pid_t pid) {
  std::set<uint64_t> ids;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec)) {
    std::string info = read_file(fd.path());
    if (auto at = info.find("link_id:"); at != std::string::npos)
      ids.insert(std::strtoull(info.c_str() + at + 8, nullptr, 10));
  }
  return ids;
}

// An always-on recording keeps only its live entries: once an entered
// process ends, the copy of the library it mapped (its file, held open) and
// that copy's probes (two links, or a perf event per site) are let go.
// Other busy processes of the machine (a build beside the tests) may be
// entered meanwhile: only this process's copy and the links that existed at
// its entry are looked at.
TEST(BusyEntry, AnEndedEntryLetsGoOfItsCopy) {
  REQUIRE_BPF();
  Child target({WORKLOAD_BIN, "--threads", "1", "--scale-pct", "1", "--wait", "--churn", "--hold"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "-v", "--rate", "64KiB", "-o", temp_path("ended.pb.gz")});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  std::string said = "process " + std::to_string(target.pid()) + " (alloc_sites) samples in process";
  ASSERT_TRUE(rec.wait_for_line(said, 30000, true)) << rec.err();  // the entry made, its probes attached
  uint64_t copy = entered_copy(target.pid());
  ASSERT_NE(copy, 0u) << "the target maps no copy of the library";
  ASSERT_TRUE(holds_inode(rec.pid(), copy));
  std::set<uint64_t> entered = link_ids(rec.pid());
  target.signal(SIGKILL);
  target.wait();
  bool let_go = eventually([&] { return !holds_inode(rec.pid(), copy); }, 10000);
  std::set<uint64_t> after = link_ids(rec.pid());
  size_t closed =
      std::count_if(entered.begin(), entered.end(), [&](uint64_t id) { return !after.contains(id); });
  rec.signal(SIGINT);
  ASSERT_EQ(rec.wait(60000), 0) << rec.err();
  EXPECT_TRUE(let_go) << "allocscope still holds the ended process's copy of its library";
  EXPECT_GE(closed, 2u) << "the copy's probes are still attached";
  std::filesystem::remove(temp_path("ended.pb.gz"));
}

// Whether a thread of process `pid` is traced (by an entry holding it).
bool any_thread_traced(pid_t pid) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec))
    if (read_file(task.path() / "status").find("TracerPid:\t0\n") == std::string::npos) return true;
  return false;
}

// A process killed while an entry holds one of its threads: allocscope
// collects that thread's exit (a traced thread's is its tracer's to collect,
// and until then the process's parent cannot reap it: its wait would hang
// for as long as the recording runs).
TEST(BusyEntry, AProcessKilledWhileEnteredIsLeftToItsParent) {
  REQUIRE_BPF();
  Child rec({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", "/dev/null"});
  ASSERT_TRUE(rec.wait_for_line("recording every process", 60000, true)) << rec.err();
  // Killed in a stop, the thread's exit is left to collect; killed running,
  // the entry sees it end: a few kills, to meet the first.
  for (int i = 0; i < 3; ++i) {
    Child target({WORKLOAD_BIN, "--threads", "2", "--scale-pct", "1", "--wait", "--churn", "--hold"});
    ASSERT_TRUE(target.wait_for_line("ready", 10000));
    // The entry holds a thread for milliseconds: the kill follows the look
    // that saw it held, never a second look that may find it let go.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool held = false;
    while (!(held = any_thread_traced(target.pid())) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (held) target.signal(SIGKILL);
    ASSERT_TRUE(held) << "not entered:\n" << rec.err();
    bool let_go = eventually([&] { return !any_thread_traced(target.pid()); }, 5000);
    if (!let_go) rec.signal(SIGINT);  // its end lets the thread go: the target can be reaped
    ASSERT_TRUE(let_go) << "a thread of the killed process stayed traced by allocscope";
    EXPECT_EQ(target.wait(10000), 128 + SIGKILL);
  }
  rec.signal(SIGINT);
  EXPECT_EQ(rec.wait(60000), 0) << rec.err();
}

}  // namespace
}  // namespace allocscope::test
