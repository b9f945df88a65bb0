// Aggregation of samples per (process, allocator, stack): unbiased alloc and
// live estimates, with the live set de-attributed on free. Pure logic.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/named.h"
#include "model/peak.h"
#include "stats/intervals.h"
#include "stats/lifetimes.h"

namespace allocscope {

// A stack frame value marking where an unwind stopped short: its root.
inline constexpr uint64_t kTruncatedFrame = 0;

enum class Metric { AllocSpace, AllocObjects, InuseSpace, InuseObjects };
inline constexpr std::array<Named<Metric>, 4> kMetrics{{{Metric::AllocSpace, "alloc_space"},
                                                        {Metric::AllocObjects, "alloc_objects"},
                                                        {Metric::InuseSpace, "inuse_space"},
                                                        {Metric::InuseObjects, "inuse_objects"}}};
std::optional<Metric> parse_metric(std::string_view name);
const char* metric_name(Metric m);
inline bool metric_is_bytes(Metric m) { return m == Metric::AllocSpace || m == Metric::InuseSpace; }

struct StackTotals {
  double alloc_objects = 0, alloc_bytes = 0;
  double live_objects = 0, live_bytes = 0;
  uint64_t samples = 0, live_samples = 0;
  IntervalStats alloc_stats = {}, live_stats = {};  // what the interval estimates need
  DurationHistogram lifetimes = {};                 // of sampled allocations freed
  DurationHistogram live_ages = {};                 // of samples still live (filled at snapshot)

  double value(Metric m) const;
  const IntervalStats& stats(Metric m) const;
  void merge(const StackTotals& other);
};

LiveSide live_side(const StackTotals& t);

// A stack's totals at the start of a window: the baseline of a delta, as
// Go's net/http/pprof takes it for ?seconds=N.
struct WindowBase {
  double objects = 0, bytes = 0;  // allocated
  uint64_t samples = 0;
  IntervalStats stats = {};
  double live_objects = 0, live_bytes = 0;
};
WindowBase window_base(const StackTotals& t);
// `t` as the window's change since `earlier`: what it allocated (never
// below zero, a counter) and how its live side changed (either sign, a
// gauge). The live side's interval statistics are dropped: the samples of
// the two moments overlap, so their difference's variance is not known.
void subtract_window_base(StackTotals& t, const WindowBase& earlier);

// A distinct stack: ips are innermost first, as the kernel gives them.
struct StackRecord {
  uint64_t serial = 0;  // never reused: names the stack across forget()
  uint32_t pid = 0;
  uint16_t fn = 0;  // enum as_fn
  std::vector<uint64_t> ips;
  StackTotals totals;
};

struct AllocSample {
  uint32_t pid = 0;
  uint16_t fn = 0;
  uint64_t addr = 0;
  uint64_t size = 0;
  uint64_t offset = 0;       // bytes before the sampled byte
  uint64_t ts_ns = 0;        // CLOCK_MONOTONIC
  bool live_tracked = true;  // false when the kernel's live map was full
  bool kernel_held = true;   // the kernel keeps its live entry (not when its free comes another way)
  std::span<const uint64_t> ips;
};

struct ProfileCounters {
  uint64_t stacks_full = 0;        // samples lost: stack table at capacity
  uint64_t stacks_full_bytes = 0;  // ... their requested bytes
  uint64_t live_full = 0;          // samples not tracked live: live table at capacity
  uint64_t live_full_bytes = 0;
  uint64_t live_share = 0;  // samples not tracked live: their process held its share (set_live_share)
  uint64_t live_share_bytes = 0;
  uint64_t unmatched_frees = 0;  // free of an address with no live sample
  uint64_t replaced_live = 0;    // an address sampled again before its free was seen
};

// Exact mode: what the kernel counted at one stack since the last look.
struct ExactDelta {
  uint64_t allocs = 0, alloc_bytes = 0;
  uint64_t frees = 0, free_bytes = 0;
  DurationHistogram lifetimes;  // of the frees
  bool collected = false;       // a garbage collector frees the blocks: no live side is known
};

class Profile {
 public:
  Profile(uint64_t rate, size_t max_stacks, size_t max_live);

  // The index of a stack, added when new; nullopt when the table is full
  // (counted as stacks_full by the caller's choice: on_alloc counts it).
  std::optional<uint32_t> intern(uint32_t pid, uint16_t fn, std::span<const uint64_t> ips);
  // Exact mode: adds what the kernel counted at a stack.
  void add_exact(uint32_t stack, const ExactDelta& d);
  // Exact mode: the stack's blocks are no longer in use (its process ended).
  void release_live(uint32_t stack);
  // Exact mode: when each still-live block of each stack was allocated
  // (CLOCK_MONOTONIC), for live_ages().
  void set_live_times(std::unordered_map<uint32_t, std::vector<uint64_t>> times) {
    live_times_ = std::move(times);
  }

  void on_alloc(const AllocSample& s);
  // Live samples one process may hold (0: no limit). The kernel keeps its
  // own share of the entries it holds; this one holds for the samples whose
  // frees come another way (an entered process's ring).
  void set_live_share(uint32_t share) { live_share_ = share; }
  // A free older than the live sample at its address (ts_ns before the
  // sample's) was of the block before it, already replaced: passed over.
  void on_free(uint32_t pid, uint64_t addr, uint64_t ts_ns = 0);
  // The process ended (exit or exec): its memory is no longer in use. Returns
  // the addresses of the live samples dropped that the kernel holds.
  std::vector<uint64_t> drop_process(uint32_t pid);
  // The process's live samples whose free the kernel was to see are handed
  // to another way (its frees come through a ring from now on): their
  // addresses, no longer the kernel's to hold. hand_back_live undoes it
  // for those still live, when that way could not take them.
  std::vector<uint64_t> hand_over_live(uint32_t pid);
  void hand_back_live(uint32_t pid, std::span<const uint64_t> addrs);
  // How many live samples the kernel holds were taken in [from_ns, to_ns).
  size_t kernel_held_between(uint32_t pid, uint64_t from_ns, uint64_t to_ns) const;
  // Every live sample forgotten (their frees will not be seen).
  void drop_all_live();
  // Starts a new interval: alloc totals and sample counts to zero, the live
  // set (and its estimates) kept.
  void reset_alloc_totals();
  // Forgets the stacks `drop` picks, with any live samples they still have
  // (an always-on recording makes room this way for new processes).
  // Returns each old index's new one, kGone for the stacks forgotten.
  static constexpr uint32_t kGone = UINT32_MAX;
  std::vector<uint32_t> forget(const std::function<bool(const StackRecord&)>& drop);
  // Where fold() moves a stack: to another process instance, with return
  // addresses that may differ (the same code, named apart from its process).
  struct FoldTo {
    uint32_t pid = 0;
    std::vector<uint64_t> ips;
  };
  // Moves each stack `into` names (indexed like stacks(); nullopt: it stays)
  // to the stack of that process, allocator function and addresses, made
  // when new: where several meet, their totals add up. A delta's memory
  // bounded by what is distinct, not by processes. Returns each old index's
  // new one (several may share one; none is kGone).
  std::vector<uint32_t> fold(const std::vector<std::optional<FoldTo>>& into);

  // Keeps the in-use profile at the highest live estimate from now on.
  void keep_peak() { keep_peak_ = true; }
  // Exact mode: the changes the kernel's totals made (add_exact,
  // release_live) end one step, at ts_ns. Sampling mode settles by itself.
  void settle_peak(uint64_t ts_ns);
  const PeakKeeper& peak() const { return peak_; }
  // Every stack's live side at the peak (indexed like stacks()).
  std::vector<LiveSide> live_at_peak() const;
  // The estimate of bytes live now, over every stack.
  double live_bytes() const { return live_bytes_; }
  // With keep_peak: each process instance's own highest live estimate.
  struct ProcessPeak {
    double live = 0, peak = 0;
    uint64_t peak_ns = 0;
  };
  const std::unordered_map<uint32_t, ProcessPeak>& process_peaks() const { return process_peaks_; }

  uint64_t rate() const { return rate_; }
  const std::vector<StackRecord>& stacks() const { return stacks_; }
  const ProfileCounters& counters() const { return counters_; }
  size_t live_count() const { return live_count_; }
  // Ages at `now_ns` of each stack's live samples, indexed like stacks().
  std::vector<DurationHistogram> live_ages(uint64_t now_ns) const;

 private:
  struct LiveEntry {
    uint32_t stack;
    bool kernel_held;
    double objects, bytes;
    uint64_t size, offset, ts_ns;
  };

  // Live samples per process, so that an ended process drops its own at once.
  using LiveSet = std::unordered_map<uint64_t, LiveEntry>;  // address -> sample
  static std::string key_of(uint32_t pid, uint16_t fn, std::span<const uint64_t> ips);
  // After the stacks were renumbered: live samples, times and peaks follow.
  void renumber_live(const std::vector<uint32_t>& remap);
  void unlive(const LiveEntry& e);
  void live_changing(uint32_t stack, double bytes_delta);
  std::vector<LiveSide> live_sides() const;

  uint64_t rate_;
  size_t max_stacks_, max_live_;
  std::vector<StackRecord> stacks_;
  std::unordered_map<std::string, uint32_t> index_;
  std::unordered_map<uint32_t, LiveSet> live_;  // pid -> its live samples
  uint32_t live_share_ = 0;
  size_t live_count_ = 0;
  uint64_t next_serial_ = 1;
  ProfileCounters counters_;
  std::unordered_map<uint32_t, std::vector<uint64_t>> live_times_;  // exact mode
  double live_bytes_ = 0;
  bool keep_peak_ = false;
  PeakKeeper peak_;
  std::unordered_map<uint32_t, ProcessPeak> process_peaks_;  // by instance
};

}  // namespace allocscope
