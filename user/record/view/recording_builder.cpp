#include "record/view/recording_builder.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "allocscope.h"
#include "probe/placement/allocator_entries.h"

namespace allocscope {
namespace {

// The root of a stack whose unwinding stopped short.
FrameInfo truncated() {
  FrameInfo f;
  f.function = "[truncated]";
  f.frames.push_back({"[truncated]", "", "", 0});
  return f;
}

class Builder {
 public:
  Builder(Symbolizer& symbolizer, Recording& r) : sym_(symbolizer), r_(r) {}

  // The caller's frame at return address `ip` in resolved mapping `map`.
  uint32_t frame(uint32_t map, uint64_t ip) {
    auto key = std::pair{map, ip};
    if (auto it = locations_.find(key); it != locations_.end()) return it->second;
    FrameInfo f = ip == kTruncatedFrame ? truncated() : sym_.describe(map, ip);
    RecLocation loc = located(map, ip - 1, f.mapping, f.build_id);
    for (const SourceFrame& s : f.frames)  // innermost first, as pprof wants
      loc.lines.push_back({function(s.function, s.system_name, s.file), s.line});
    return add_location(key, std::move(loc));
  }

  // The allocator entry point called: the leaf of every sample.
  uint32_t allocator(uint32_t map, int fn, uint64_t addr) {
    auto key = std::pair{map, addr ? addr : ~uint64_t(fn)};
    if (auto it = locations_.find(key); it != locations_.end()) return it->second;
    const Mapping* m = addr ? sym_.mapping(map) : nullptr;
    RecLocation loc = located(map, addr, m, "");
    loc.lines.push_back({function(entry_name(fn), entry_name(fn), ""), 0});
    return add_location(key, std::move(loc));
  }

 private:
  RecLocation located(uint32_t map, uint64_t address, const Mapping* m, const std::string& build_id) {
    RecLocation loc;
    loc.address = address;
    loc.mapping = m ? mapping(map, *m, build_id) : -1;
    return loc;
  }

  uint32_t add_location(std::pair<uint32_t, uint64_t> key, RecLocation loc) {
    uint32_t id = uint32_t(r_.locations.size());
    r_.locations.push_back(std::move(loc));
    locations_.emplace(key, id);
    return id;
  }

  int32_t mapping(uint32_t map, const Mapping& m, const std::string& build_id) {
    auto key = map;
    if (auto it = mappings_.find(key); it != mappings_.end()) {
      if (r_.mappings[it->second].build_id.empty()) r_.mappings[it->second].build_id = build_id;
      return it->second;
    }
    int32_t id = int32_t(r_.mappings.size());
    r_.mappings.push_back({m.start, m.end, m.offset, m.path, build_id});
    mappings_.emplace(key, id);
    return id;
  }

  // pprof keeps a line's file on its function, so one function per file.
  uint32_t function(const std::string& name, const std::string& system, const std::string& file) {
    auto key = std::tuple{name, system, file};
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    uint32_t id = uint32_t(r_.functions.size());
    r_.functions.push_back({name, system, file});
    functions_.emplace(key, id);
    return id;
  }

  Symbolizer& sym_;
  Recording& r_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> locations_;
  std::map<uint32_t, int32_t> mappings_;
  std::map<std::tuple<std::string, std::string, std::string>, uint32_t> functions_;
};

}  // namespace

namespace {

RecSample sample_of(Builder& b, const StackRecord& s, const StackOrigin& o, StackTotals totals) {
  RecSample sample;
  sample.pid = o.pid;
  sample.ns_pid = o.ns_pid;
  sample.instance = s.pid;
  sample.comm = o.comm;
  sample.totals = std::move(totals);
  sample.locations.push_back(b.allocator(o.allocator_mapping, s.fn, o.allocator_addr));
  for (size_t f = 0; f < s.ips.size(); ++f)
    sample.locations.push_back(
        b.frame(f < o.mappings.size() ? o.mappings[f] : Symbolizer::kNoMapping, s.ips[f]));
  return sample;
}

}  // namespace

namespace {

Recording empty_recording(const RecordingMeta& meta) {
  Recording r;
  r.rate = meta.rate;
  r.time_nanos = meta.time_nanos;
  r.duration_nanos = meta.duration_nanos;
  r.default_metric = meta.metric;
  r.counters = meta.counters;
  r.paths = meta.paths;
  return r;
}

}  // namespace

Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins, const StackChoice* choice) {
  Recording r = empty_recording(meta);
  Builder b(symbolizer, r);
  std::vector<DurationHistogram> ages = profile.live_ages(meta.now_ns);
  auto add = [&](uint32_t i) {
    StackTotals totals = profile.stacks()[i].totals;
    totals.live_ages = ages[i];
    if (choice && choice->baseline) {
      if (auto it = choice->baseline->find(profile.stacks()[i].serial); it != choice->baseline->end())
        subtract_window_base(totals, it->second);
      if (totals.alloc_objects == 0 && totals.live_objects == 0) return;
    }
    r.samples.push_back(sample_of(b, profile.stacks()[i], origins[i], std::move(totals)));
  };
  if (choice)
    for (uint32_t i : choice->stacks) add(i);
  else
    for (uint32_t i = 0; i < profile.stacks().size(); ++i) add(i);
  put_program_first(r);
  return r;
}

Recording build_peak_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                               const std::vector<StackOrigin>& origins) {
  Recording r = empty_recording(meta);
  Builder b(symbolizer, r);
  std::vector<LiveSide> peak = profile.live_at_peak();
  for (uint32_t i = 0; i < profile.stacks().size(); ++i) {
    if (peak[i].samples == 0 && peak[i].objects == 0) continue;
    StackTotals totals;
    totals.live_objects = peak[i].objects;
    totals.live_bytes = peak[i].bytes;
    totals.live_samples = peak[i].samples;
    totals.live_stats = peak[i].stats;
    r.samples.push_back(sample_of(b, profile.stacks()[i], origins[i], std::move(totals)));
  }
  put_program_first(r);
  return r;
}

uint64_t new_recording_id() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = uint64_t(device()) << 32 | device();
  return id;
}

}  // namespace allocscope
