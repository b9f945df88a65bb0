#include "model/profile.h"

#include <algorithm>
#include <cstring>

#include "stats/sampling.h"

namespace allocscope {

namespace {

void settle_process(Profile::ProcessPeak& p, uint64_t ts_ns) {
  if (p.live <= p.peak) return;
  p.peak = p.live;
  p.peak_ns = ts_ns;
}

}  // namespace

std::optional<Metric> parse_metric(std::string_view name) { return parse_named(kMetrics, name); }

const char* metric_name(Metric m) { return name_of(kMetrics, m).data(); }  // the table's literals end in NUL

double StackTotals::value(Metric m) const {
  switch (m) {
    case Metric::AllocSpace:
      return alloc_bytes;
    case Metric::AllocObjects:
      return alloc_objects;
    case Metric::InuseSpace:
      return live_bytes;
    case Metric::InuseObjects:
      return live_objects;
  }
  return 0;
}

const IntervalStats& StackTotals::stats(Metric m) const {
  return m == Metric::InuseSpace || m == Metric::InuseObjects ? live_stats : alloc_stats;
}

void StackTotals::merge(const StackTotals& o) {
  alloc_objects += o.alloc_objects;
  alloc_bytes += o.alloc_bytes;
  live_objects += o.live_objects;
  live_bytes += o.live_bytes;
  samples += o.samples;
  live_samples += o.live_samples;
  alloc_stats.merge(o.alloc_stats);
  live_stats.merge(o.live_stats);
  lifetimes.merge(o.lifetimes);
  live_ages.merge(o.live_ages);
}

WindowBase window_base(const StackTotals& t) {
  return {t.alloc_objects, t.alloc_bytes, t.samples, t.alloc_stats, t.live_objects, t.live_bytes};
}

void subtract_window_base(StackTotals& t, const WindowBase& e) {
  t.alloc_objects = std::max(0.0, t.alloc_objects - e.objects);
  t.alloc_bytes = std::max(0.0, t.alloc_bytes - e.bytes);
  t.samples -= std::min(t.samples, e.samples);
  t.alloc_stats.subtract(e.stats);
  t.live_objects -= e.live_objects;
  t.live_bytes -= e.live_bytes;
  t.live_stats = {};
}

Profile::Profile(uint64_t rate, size_t max_stacks, size_t max_live)
    : rate_(rate), max_stacks_(max_stacks), max_live_(max_live) {}

std::string Profile::key_of(uint32_t pid, uint16_t fn, std::span<const uint64_t> ips) {
  std::string key(sizeof pid + sizeof fn + ips.size_bytes(), '\0');
  std::memcpy(key.data(), &pid, sizeof pid);
  std::memcpy(key.data() + sizeof pid, &fn, sizeof fn);
  if (!ips.empty()) std::memcpy(key.data() + sizeof pid + sizeof fn, ips.data(), ips.size_bytes());
  return key;
}

std::optional<uint32_t> Profile::intern(uint32_t pid, uint16_t fn, std::span<const uint64_t> ips) {
  std::string key = key_of(pid, fn, ips);
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  if (stacks_.size() >= max_stacks_) return std::nullopt;
  uint32_t id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back({next_serial_++, pid, fn, {ips.begin(), ips.end()}, {}});
  index_.emplace(std::move(key), id);
  return id;
}

void Profile::add_exact(uint32_t stack, const ExactDelta& d) {
  StackTotals& t = stacks_[stack].totals;
  t.alloc_objects += double(d.allocs);
  t.alloc_bytes += double(d.alloc_bytes);
  t.samples += d.allocs;
  t.alloc_stats.add_exact(d.allocs, d.alloc_bytes);
  if (d.collected) return;
  live_changing(stack, double(d.alloc_bytes) - double(d.free_bytes));
  t.live_objects += double(d.allocs) - double(d.frees);
  t.live_bytes += double(d.alloc_bytes) - double(d.free_bytes);
  t.live_samples = t.live_samples + d.allocs - std::min(d.frees, t.live_samples + d.allocs);
  t.live_stats.add_exact(d.allocs, d.alloc_bytes);
  t.live_stats.remove_exact(d.frees, d.free_bytes);
  t.lifetimes.merge(d.lifetimes);
}

void Profile::release_live(uint32_t stack) {
  live_changing(stack, -stacks_[stack].totals.live_bytes);
  StackTotals& t = stacks_[stack].totals;
  t.live_objects = t.live_bytes = 0;
  t.live_samples = 0;
  t.live_stats = {};
  live_times_.erase(stack);
}

void Profile::on_alloc(const AllocSample& s) {
  if (auto set = live_.find(s.pid); set != live_.end()) {
    if (auto old = set->second.find(s.addr); old != set->second.end()) {
      ++counters_.replaced_live;  // its free was missed (e.g. before attach)
      unlive(old->second);
      set->second.erase(old);
    }
  }
  auto id = intern(s.pid, s.fn, s.ips);
  if (!id) {
    ++counters_.stacks_full;
    counters_.stacks_full_bytes += s.size;
    return;
  }
  Weight w = unbias(s.size, rate_);
  StackTotals& t = stacks_[*id].totals;
  t.alloc_objects += w.objects;
  t.alloc_bytes += w.bytes;
  ++t.samples;
  t.alloc_stats.add_sample(s.size, s.offset, rate_);

  if (!s.live_tracked) return;
  if (auto set = live_.find(s.pid); live_share_ && set != live_.end() && set->second.size() >= live_share_) {
    ++counters_.live_share;
    counters_.live_share_bytes += s.size;
    return;
  }
  if (live_count_ >= max_live_) {
    ++counters_.live_full;
    counters_.live_full_bytes += s.size;
    return;
  }
  live_changing(*id, w.bytes);
  live_[s.pid].emplace(s.addr, LiveEntry{*id, s.kernel_held, w.objects, w.bytes, s.size, s.offset, s.ts_ns});
  ++live_count_;
  t.live_objects += w.objects;
  t.live_bytes += w.bytes;
  ++t.live_samples;
  t.live_stats.add_sample(s.size, s.offset, rate_);
  if (keep_peak_) {  // only this process grew
    peak_.settle(live_bytes_, s.ts_ns);
    settle_process(process_peaks_[s.pid], s.ts_ns);
  }
}

void Profile::reset_alloc_totals() {
  for (StackRecord& s : stacks_) {
    s.totals.alloc_objects = s.totals.alloc_bytes = 0;
    s.totals.samples = 0;
    s.totals.alloc_stats = {};
    s.totals.lifetimes = {};
  }
}

void Profile::on_free(uint32_t pid, uint64_t addr, uint64_t ts_ns) {
  auto set = live_.find(pid);
  auto it = set == live_.end() ? LiveSet::iterator() : set->second.find(addr);
  if (set == live_.end() || it == set->second.end()) {
    ++counters_.unmatched_frees;
    return;
  }
  if (ts_ns && ts_ns < it->second.ts_ns) return;
  if (ts_ns >= it->second.ts_ns) stacks_[it->second.stack].totals.lifetimes.add(ts_ns - it->second.ts_ns);
  unlive(it->second);
  set->second.erase(it);
  if (set->second.empty()) live_.erase(set);
}

std::vector<uint64_t> Profile::drop_process(uint32_t pid) {
  std::vector<uint64_t> addrs;
  auto set = live_.find(pid);
  if (set == live_.end()) return addrs;
  for (const auto& [addr, e] : set->second) {
    if (e.kernel_held) addrs.push_back(addr);
    unlive(e);
  }
  live_.erase(set);
  return addrs;
}

std::vector<uint64_t> Profile::hand_over_live(uint32_t pid) {
  std::vector<uint64_t> addrs;
  auto set = live_.find(pid);
  if (set == live_.end()) return addrs;
  for (auto& [addr, e] : set->second)
    if (e.kernel_held) {
      e.kernel_held = false;
      addrs.push_back(addr);
    }
  return addrs;
}

void Profile::hand_back_live(uint32_t pid, std::span<const uint64_t> addrs) {
  auto set = live_.find(pid);
  if (set == live_.end()) return;
  for (uint64_t addr : addrs)
    if (auto it = set->second.find(addr); it != set->second.end()) it->second.kernel_held = true;
}

size_t Profile::kernel_held_between(uint32_t pid, uint64_t from_ns, uint64_t to_ns) const {
  auto set = live_.find(pid);
  if (set == live_.end()) return 0;
  return size_t(std::count_if(set->second.begin(), set->second.end(), [&](const auto& item) {
    const LiveEntry& e = item.second;
    return e.kernel_held && e.ts_ns >= from_ns && e.ts_ns < to_ns;
  }));
}

void Profile::drop_all_live() {
  for (const auto& [pid, set] : live_)
    for (const auto& [addr, e] : set) unlive(e);
  live_.clear();
  live_times_.clear();
}

std::vector<uint32_t> Profile::forget(const std::function<bool(const StackRecord&)>& drop) {
  std::vector<uint32_t> remap(stacks_.size(), kGone);
  std::vector<StackRecord> kept;
  for (uint32_t i = 0; i < stacks_.size(); ++i) {
    if (drop(stacks_[i])) continue;
    remap[i] = uint32_t(kept.size());
    kept.push_back(std::move(stacks_[i]));
  }
  stacks_ = std::move(kept);
  for (auto it = index_.begin(); it != index_.end();) {
    it->second = remap[it->second];
    it = it->second == kGone ? index_.erase(it) : std::next(it);
  }
  renumber_live(remap);
  return remap;
}

std::vector<uint32_t> Profile::fold(const std::vector<std::optional<FoldTo>>& into) {
  std::vector<uint32_t> remap(stacks_.size(), kGone);
  std::vector<StackRecord> out;
  std::unordered_map<std::string, uint32_t> index;
  auto place = [&](StackRecord&& s) {
    auto [it, made] = index.try_emplace(key_of(s.pid, s.fn, s.ips), uint32_t(out.size()));
    if (made)
      out.push_back(std::move(s));
    else
      out[it->second].totals.merge(s.totals);
    return it->second;
  };
  auto moves = [&into](uint32_t i) { return i < into.size() && into[i]; };
  // Those that stay are placed first: a stack folded onto one finds it.
  for (uint32_t i = 0; i < stacks_.size(); ++i)
    if (!moves(i)) remap[i] = place(std::move(stacks_[i]));
  for (uint32_t i = 0; i < stacks_.size(); ++i)
    if (moves(i))
      remap[i] =
          place({next_serial_++, into[i]->pid, stacks_[i].fn, into[i]->ips, std::move(stacks_[i].totals)});
  stacks_ = std::move(out);
  index_ = std::move(index);
  renumber_live(remap);
  return remap;
}

void Profile::renumber_live(const std::vector<uint32_t>& remap) {
  for (auto set = live_.begin(); set != live_.end();) {
    for (auto e = set->second.begin(); e != set->second.end();) {
      e->second.stack = remap[e->second.stack];
      if (e->second.stack != kGone) {
        ++e;
        continue;
      }
      e = set->second.erase(e);
      --live_count_;
    }
    set = set->second.empty() ? live_.erase(set) : std::next(set);
  }
  // The peak's journal names stacks by their old indices: it starts again.
  peak_.reset();
  live_bytes_ = 0;
  for (auto& [instance, p] : process_peaks_) p.live = 0;
  for (const StackRecord& s : stacks_) {
    live_bytes_ += s.totals.live_bytes;
    if (keep_peak_) process_peaks_[s.pid].live += s.totals.live_bytes;
  }
  std::unordered_map<uint32_t, std::vector<uint64_t>> times;
  for (auto& [stack, ts] : live_times_)
    if (remap[stack] != kGone) times[remap[stack]].insert(times[remap[stack]].end(), ts.begin(), ts.end());
  live_times_ = std::move(times);
}

std::vector<DurationHistogram> Profile::live_ages(uint64_t now_ns) const {
  std::vector<DurationHistogram> ages(stacks_.size());
  for (const auto& [pid, set] : live_)
    for (const auto& [addr, e] : set) ages[e.stack].add(now_ns > e.ts_ns ? now_ns - e.ts_ns : 0);
  for (const auto& [stack, times] : live_times_)
    if (stack < ages.size())
      for (uint64_t ts : times) ages[stack].add(now_ns > ts ? now_ns - ts : 0);
  return ages;
}

// Takes a live sample out of its stack's totals (the caller erases it).
void Profile::unlive(const LiveEntry& e) {
  live_changing(e.stack, -e.bytes);
  StackTotals& t = stacks_[e.stack].totals;
  t.live_objects -= e.objects;
  t.live_bytes -= e.bytes;
  --t.live_samples;
  t.live_stats.remove_sample(e.size, e.offset, rate_);
  --live_count_;
}

LiveSide live_side(const StackTotals& t) {
  return {t.live_objects, t.live_bytes, t.live_samples, t.live_stats};
}

std::vector<LiveSide> Profile::live_sides() const {
  std::vector<LiveSide> sides;
  sides.reserve(stacks_.size());
  for (const StackRecord& s : stacks_) sides.push_back(live_side(s.totals));
  return sides;
}

// A stack's live side is about to change by `bytes_delta`: the totals
// follow, and the peak's journal keeps its value now (or, once the journal
// is full, the peak is copied whole).
void Profile::live_changing(uint32_t stack, double bytes_delta) {
  live_bytes_ += bytes_delta;
  if (!keep_peak_) return;
  process_peaks_[stacks_[stack].pid].live += bytes_delta;
  if (peak_.before_change(stack, live_side(stacks_[stack].totals), stacks_.size()))
    peak_.keep_whole(live_sides());
}

// Exact mode, once per read of the kernel's totals: every process is looked at.
void Profile::settle_peak(uint64_t ts_ns) {
  if (!keep_peak_) return;
  peak_.settle(live_bytes_, ts_ns);
  for (auto& [instance, p] : process_peaks_) settle_process(p, ts_ns);
}

std::vector<LiveSide> Profile::live_at_peak() const { return peak_.at_peak(live_sides()); }

}  // namespace allocscope
