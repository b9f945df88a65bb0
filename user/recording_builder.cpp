#include "recording_builder.h"

#include <map>
#include <tuple>

#include "allocator_probes.h"

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

  // The caller's frame at return address `ip`.
  uint32_t frame(uint32_t pid, uint64_t ip) {
    auto key = std::pair{pid, ip};
    if (auto it = locations_.find(key); it != locations_.end())
      return it->second;
    FrameInfo f = ip == kTruncatedFrame ? truncated() : sym_.describe(pid, ip);
    RecLocation loc = located(pid, ip - 1, f.mapping, f.build_id);
    for (const SourceFrame& s : f.frames)  // innermost first, as pprof wants
      loc.lines.push_back({function(s.function, s.system_name, s.file), s.line});
    return add_location(key, std::move(loc));
  }

  // The allocator entry point called: the leaf of every sample.
  uint32_t allocator(uint32_t pid, int fn, uint64_t addr) {
    auto key = std::pair{pid, addr ? addr : ~uint64_t(fn)};
    if (auto it = locations_.find(key); it != locations_.end())
      return it->second;
    const Mapping* m = addr ? sym_.mapping_at(pid, addr) : nullptr;
    RecLocation loc = located(pid, addr, m, "");
    loc.lines.push_back({function(fn_name(fn), fn_name(fn), ""), 0});
    return add_location(key, std::move(loc));
  }

 private:
  RecLocation located(uint32_t pid, uint64_t address, const Mapping* m, const std::string& build_id) {
    RecLocation loc;
    loc.address = address;
    loc.mapping = m ? mapping(pid, *m, build_id) : -1;
    return loc;
  }

  uint32_t add_location(std::pair<uint32_t, uint64_t> key, RecLocation loc) {
    uint32_t id = uint32_t(r_.locations.size());
    r_.locations.push_back(std::move(loc));
    locations_.emplace(key, id);
    return id;
  }

  int32_t mapping(uint32_t pid, const Mapping& m, const std::string& build_id) {
    auto key = std::pair{pid, m.start};
    if (auto it = mappings_.find(key); it != mappings_.end()) {
      if (r_.mappings[it->second].build_id.empty())
        r_.mappings[it->second].build_id = build_id;
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
    if (auto it = functions_.find(key); it != functions_.end())
      return it->second;
    uint32_t id = uint32_t(r_.functions.size());
    r_.functions.push_back({name, system, file});
    functions_.emplace(key, id);
    return id;
  }

  Symbolizer& sym_;
  Recording& r_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> locations_;
  std::map<std::pair<uint32_t, uint64_t>, int32_t> mappings_;
  std::map<std::tuple<std::string, std::string, std::string>, uint32_t> functions_;
};

}  // namespace

Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const AllocatorAddress& allocator_address) {
  Recording r;
  r.rate = meta.rate;
  r.time_nanos = meta.time_nanos;
  r.duration_nanos = meta.duration_nanos;
  r.default_metric = meta.metric;
  r.counters = meta.counters;
  Builder b(symbolizer, r);
  std::vector<DurationHistogram> ages = profile.live_ages(meta.now_ns);
  for (size_t i = 0; i < profile.stacks().size(); ++i) {
    const StackRecord& s = profile.stacks()[i];
    RecSample sample;
    sample.pid = s.pid;
    sample.comm = symbolizer.comm(pid_t(s.pid));
    sample.totals = s.totals;
    sample.totals.live_ages = ages[i];
    sample.locations.push_back(b.allocator(s.pid, s.fn, allocator_address(s.pid, s.fn)));
    for (uint64_t ip : s.ips)
      sample.locations.push_back(b.frame(s.pid, ip));
    r.samples.push_back(std::move(sample));
  }
  return r;
}

}  // namespace allocscope
