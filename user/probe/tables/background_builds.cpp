#include "probe/tables/background_builds.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace allocscope {
namespace {

// ALLOCSCOPE_TEST_SLOW_TABLE=NAME:MS makes the build of every file whose path
// (or, a link, whose target) contains NAME take MS milliseconds more:
// the tests prove with it that a slow build loses no event. Only in builds
// with tests (ALLOCSCOPE_TEST_HOOKS, user/CMakeLists.txt).
void test_delay([[maybe_unused]] const std::string& path) {
#ifdef ALLOCSCOPE_TEST_HOOKS
  const char* spec = std::getenv("ALLOCSCOPE_TEST_SLOW_TABLE");
  if (!spec) return;
  std::string s(spec);
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return;
  std::error_code ec;
  std::string target = std::filesystem::read_symlink(path, ec).string();
  std::string name = s.substr(0, colon);
  if (path.find(name) == std::string::npos && target.find(name) == std::string::npos) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(s.c_str() + colon + 1)));
#endif
}

}  // namespace

BuiltTable timed_build(const std::string& path, const RuntimeTablesReaders& runtime_tables) {
  auto t0 = std::chrono::steady_clock::now();
  test_delay(path);
  BuiltTable b{build_unwind_table(path, runtime_tables), 0};
  // What the build let go of goes back to the system: glibc keeps freed
  // heap otherwise (in a worker's own arena, and under a mmap threshold a
  // large free has raised), and LLVM's build left 40 MB resident for good.
  // One trim at a time: where jemalloc serves malloc (allocscope's own
  // binary), the C library's malloc is first set up by malloc_trim itself,
  // without a lock, and two builds ending together trimmed an arena half
  // made (a SIGSEGV at address 8 in malloc_trim, seen once in CI).
  static std::mutex trimming;
  {
    std::lock_guard lock(trimming);
    malloc_trim(0);
  }
  b.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

BackgroundBuilds::~BackgroundBuilds() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void BackgroundBuilds::submit(std::vector<File> files, bool first) {
  {
    std::lock_guard lock(mutex_);
    for (File& f : files) first ? files_.push_front(std::move(f)) : files_.push_back(std::move(f));
    // Two at least: one long build leaves a worker for the kernel's requests.
    unsigned n = std::clamp(std::thread::hardware_concurrency(), 2u, 4u);
    while (workers_.size() < n) workers_.emplace_back([this] { work(); });
  }
  wake_.notify_all();
}

std::vector<FinishedBuild> BackgroundBuilds::take() {
  std::lock_guard lock(mutex_);
  has_done_ = false;
  return std::exchange(done_, {});
}

void BackgroundBuilds::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !files_.empty(); });
    if (stopping_) return;
    File f = std::move(files_.front());
    files_.pop_front();
    lock.unlock();
    FinishedBuild built{f.key, f.path,
                        timed_build("/proc/self/fd/" + std::to_string(f.file.get()), runtime_tables_)};
    f.file.reset();
    lock.lock();
    done_.push_back(std::move(built));
    has_done_ = true;
    lock.unlock();
    finished_();
    lock.lock();
  }
}

}  // namespace allocscope
