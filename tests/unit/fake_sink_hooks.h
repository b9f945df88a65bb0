// Fakes of EventSink's hooks for unit tests that feed it events without a
// kernel.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "record/events/sink_hooks.h"

namespace allocscope {

// Fakes of the sink's hooks: every process recorded (unless `only` names
// another), none kept at exit, no allocator known; what would reach the
// kernel is noted.
struct FakeVerdicts : ProcessVerdicts {
  std::string only;  // when set: the one name accepted
  std::vector<uint32_t> rejected, unrejected;
  bool accept(uint32_t, const std::string& comm, uint64_t) override { return only.empty() || comm == only; }
  std::vector<std::string> judged;  // names judge_name was asked about
  bool judge_name(uint32_t, const std::string& comm) override {
    judged.push_back(comm);
    return !only.empty() && comm != only;
  }
  void reject(uint32_t tgid) override { rejected.push_back(tgid); }
  void unreject(uint32_t tgid, bool) override { unrejected.push_back(tgid); }
  bool keeps_live_at_exit(uint32_t) const override { return false; }
};

struct FakeKernel : KernelState {
  std::vector<uint64_t> forgotten_live;
  void forget_live(uint32_t, std::span<const uint64_t> addrs) override {
    forgotten_live.insert(forgotten_live.end(), addrs.begin(), addrs.end());
  }
  std::vector<ExactEntry> exact_totals(std::span<const uint64_t>) override { return {}; }
  void forget_exact(std::span<const uint64_t>) override {}
  void release_held(uint32_t tgid, uint64_t stamp) override {
    released.push_back(tgid);
    released_stamps.push_back(stamp);
  }
  void forget_file(uint32_t dev, uint64_t ino) override { forgotten_files.push_back({dev, ino}); }
  std::vector<uint32_t> released;
  std::vector<uint64_t> released_stamps;
  std::vector<std::pair<uint32_t, uint64_t>> forgotten_files;
};

struct FakeLibraries : LibraryWatch {
  void new_library(const as_proc_event& e) override { mapped.push_back(e.tgid); }
  std::vector<uint32_t> mapped;
  void on_exec(uint32_t tgid) override { examined.push_back(tgid); }
  std::vector<uint32_t> examined;  // programs an exec ran, looked at for allocators
  uint64_t allocator_address(uint32_t, int) override { return 0; }
};

}  // namespace allocscope
