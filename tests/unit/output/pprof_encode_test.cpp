// The pprof encoder: a recording comes back field by field, and what it
// writes keeps profile.proto's invariants.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "output/pprof.h"
#include "output/pprof_sidecar.h"
#include "pprof_fixture.h"

namespace allocscope {
namespace {

TEST(PprofRoundTrip, RebuildsTheRecordingFieldByField) {
  const Recording r = synthetic();
  auto d = decode_pprof(encode_pprof(r, "allocscope 0.1.0").value());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->rate, r.rate);
  EXPECT_EQ(d->time_nanos, r.time_nanos);
  EXPECT_EQ(d->duration_nanos, r.duration_nanos);
  EXPECT_EQ(d->default_metric, r.default_metric);
  EXPECT_EQ(d->counters, r.counters);
  EXPECT_EQ(d->paths, r.paths);

  ASSERT_EQ(d->mappings.size(), r.mappings.size());
  for (size_t i = 0; i < r.mappings.size(); ++i) {
    EXPECT_EQ(d->mappings[i].start, r.mappings[i].start) << i;
    EXPECT_EQ(d->mappings[i].limit, r.mappings[i].limit) << i;
    EXPECT_EQ(d->mappings[i].offset, r.mappings[i].offset) << i;
    EXPECT_EQ(d->mappings[i].file, r.mappings[i].file) << i;
    EXPECT_EQ(d->mappings[i].build_id, r.mappings[i].build_id) << i;
  }
  ASSERT_EQ(d->functions.size(), r.functions.size());
  for (size_t i = 0; i < r.functions.size(); ++i) {
    EXPECT_EQ(d->functions[i].name, r.functions[i].name) << i;
    EXPECT_EQ(d->functions[i].system_name, r.functions[i].system_name) << i;
    EXPECT_EQ(d->functions[i].filename, r.functions[i].filename) << i;
  }
  ASSERT_EQ(d->locations.size(), r.locations.size());
  for (size_t i = 0; i < r.locations.size(); ++i) {
    EXPECT_EQ(d->locations[i].mapping, r.locations[i].mapping) << i;
    EXPECT_EQ(d->locations[i].address, r.locations[i].address) << i;
    ASSERT_EQ(d->locations[i].lines.size(), r.locations[i].lines.size()) << i;
    for (size_t j = 0; j < r.locations[i].lines.size(); ++j) {
      EXPECT_EQ(d->locations[i].lines[j].function, r.locations[i].lines[j].function) << i << "/" << j;
      EXPECT_EQ(d->locations[i].lines[j].line, r.locations[i].lines[j].line) << i << "/" << j;
    }
  }
  ASSERT_EQ(d->samples.size(), r.samples.size());
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const RecSample &got = d->samples[i], &want = r.samples[i];
    EXPECT_EQ(got.locations, want.locations) << i;
    EXPECT_EQ(got.pid, want.pid) << i;
    EXPECT_EQ(got.comm, want.comm) << i;
    EXPECT_EQ(got.ns_pid, want.ns_pid) << i;
    StackTotals t = rounded(want.totals);
    EXPECT_EQ(got.totals.alloc_objects, t.alloc_objects) << i;
    EXPECT_EQ(got.totals.alloc_bytes, t.alloc_bytes) << i;
    EXPECT_EQ(got.totals.live_objects, t.live_objects) << i;
    EXPECT_EQ(got.totals.live_bytes, t.live_bytes) << i;
    EXPECT_EQ(got.totals.samples, t.samples) << i;
    EXPECT_EQ(got.totals.live_samples, t.live_samples) << i;
  }
  EXPECT_EQ(frame_names(*d, d->samples[0]), frame_names(r, r.samples[0]));
}

TEST(PprofRoundTrip, RoundsValuesToNearest) {
  const Recording r = synthetic();
  auto d = decode_pprof(encode_pprof(r).value());
  ASSERT_TRUE(d) << d.error();
  const StackTotals& t = d->samples[0].totals;  // 3.4, 1572864.5, 1.6, 524288.49
  EXPECT_EQ(t.alloc_objects, 3);
  EXPECT_EQ(t.alloc_bytes, 1572865);  // halves away from zero, as the folded output
  EXPECT_EQ(t.live_objects, 2);
  EXPECT_EQ(t.live_bytes, 524288);
  const StackTotals& zero = d->samples[4].totals;  // every value rounds to 0: still kept
  EXPECT_EQ(zero.alloc_objects + zero.alloc_bytes + zero.live_objects + zero.live_bytes, 0);
}

TEST(PprofRoundTrip, SaturatesValuesOutsideInt64) {
  Recording r;
  r.samples = {{{}, 1, "x", {NAN, 1e30, -1e30, 7, 1, 0}, {}}};
  auto d = decode_pprof(encode_pprof(r).value());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->samples[0].totals.alloc_objects, 0);
  EXPECT_EQ(d->samples[0].totals.alloc_bytes, static_cast<double>(INT64_MAX));
  EXPECT_EQ(d->samples[0].totals.live_objects, static_cast<double>(INT64_MIN));
  EXPECT_EQ(d->samples[0].totals.live_bytes, 7);
}

// Process names and paths are bytes, proto3 strings must be UTF-8 (protobuf
// would not parse the file back): invalid bytes become U+FFFD, valid UTF-8
// is kept as is.
TEST(PprofRoundTrip, StringsAreMadeValidUtf8) {
  Recording r = synthetic();
  r.samples[0].comm = "caf\xc3\xa9 \xe6\x97\xa5";  // valid: kept
  r.samples[3].comm =
      "bad\xff\xc0\xaf"
      "end";                                    // 0xff, overlong '/'
  r.mappings[2].file = "/tmp/\xed\xa0\x80.so";  // a UTF-16 surrogate
  r.functions[6].name = "cut\xe6\x97";          // truncated sequence
  auto d = decode_pprof(encode_pprof(r).value());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->samples[0].comm, r.samples[0].comm);
  EXPECT_EQ(d->samples[3].comm, "bad\uFFFD\uFFFD\uFFFDend");
  EXPECT_EQ(d->mappings[2].file, "/tmp/\uFFFD\uFFFD\uFFFD.so");
  EXPECT_EQ(d->functions[6].name, "cut\uFFFD\uFFFD");
}

TEST(PprofEncode, IsGzipOfAValidProfileMessage) {
  const Recording r = synthetic();
  const std::string gz = encode_pprof(r, "allocscope 0.1.0").value();
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz.substr(0, 2), "\x1f\x8b");
  pb::Profile p = gunzip_message(gz);

  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");

  const std::array<std::pair<const char*, const char*>, 6> types = {{{"alloc_objects", "count"},
                                                                     {"alloc_space", "bytes"},
                                                                     {"inuse_objects", "count"},
                                                                     {"inuse_space", "bytes"},
                                                                     {"samples", "count"},
                                                                     {"live_samples", "count"}}};
  ASSERT_EQ(p.sample_type_size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(str(p, p.sample_type(i).type()), types[i].first) << i;
    EXPECT_EQ(str(p, p.sample_type(i).unit()), types[i].second) << i;
  }
  EXPECT_EQ(str(p, p.period_type().type()), "space");
  EXPECT_EQ(str(p, p.period_type().unit()), "bytes");
  EXPECT_EQ(p.period(), 512 * 1024);
  EXPECT_EQ(str(p, p.default_sample_type()), "inuse_space");
  EXPECT_EQ(p.time_nanos(), r.time_nanos);
  EXPECT_EQ(p.duration_nanos(), r.duration_nanos);

  std::vector<std::string> comments;
  for (int64_t c : p.comment()) comments.push_back(str(p, c));
  // What a pprof user reads: the tool and the rate. The counters and paths
  // travel in an entry of the string table nothing refers to, and come back.
  EXPECT_EQ(comments, (std::vector<std::string>{"allocscope 0.1.0", "rate=524288"}));
  int sidecars = 0;
  for (const std::string& entry : p.string_table()) sidecars += entry.starts_with(kSidecarMagic);
  EXPECT_EQ(sidecars, 1);
  auto back = decode_pprof(gz);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->counters, r.counters);
  EXPECT_EQ(back->paths, r.paths);
}

// Ids non-zero and unique, every reference resolves, leaf first.
TEST(PprofEncode, IdsAreNonZeroUniqueAndResolve) {
  const Recording r = synthetic();
  pb::Profile p = gunzip_message(encode_pprof(r).value());
  std::set<uint64_t> mappings, functions, locations;
  for (const pb::Mapping& m : p.mapping()) {
    EXPECT_NE(m.id(), 0u);
    EXPECT_TRUE(mappings.insert(m.id()).second);
  }
  for (const pb::Function& f : p.function()) {
    EXPECT_NE(f.id(), 0u);
    EXPECT_TRUE(functions.insert(f.id()).second);
  }
  for (const pb::Location& l : p.location()) {
    EXPECT_NE(l.id(), 0u);
    EXPECT_TRUE(locations.insert(l.id()).second);
    if (l.mapping_id() != 0) {
      EXPECT_TRUE(mappings.count(l.mapping_id())) << l.mapping_id();
    }
    for (const pb::Line& line : l.line())
      EXPECT_TRUE(functions.count(line.function_id())) << line.function_id();
  }
  EXPECT_EQ(mappings.size(), 3u);
  EXPECT_EQ(functions.size(), 7u);
  EXPECT_EQ(locations.size(), 7u);
  EXPECT_EQ(p.location(6).mapping_id(), 0u);  // the frame with no mapping

  ASSERT_EQ(p.sample_size(), 5);
  for (const pb::Sample& s : p.sample()) {
    EXPECT_EQ(s.value_size(), p.sample_type_size());
    for (uint64_t id : s.location_id()) EXPECT_TRUE(locations.count(id)) << id;
  }
  // Sample 0 is malloc <- handle_request (parse_header inlined) <- main.
  const pb::Sample& s = p.sample(0);
  ASSERT_EQ(s.location_id_size(), 3);
  const pb::Location& leaf = p.location(static_cast<int>(s.location_id(0)) - 1);
  EXPECT_EQ(str(p, p.function(static_cast<int>(leaf.line(0).function_id()) - 1).name()), "malloc");
  const pb::Location& inl = p.location(static_cast<int>(s.location_id(1)) - 1);
  ASSERT_EQ(inl.line_size(), 2);
  EXPECT_EQ(str(p, p.function(static_cast<int>(inl.line(0).function_id()) - 1).name()),
            "server::parse_header()");
  EXPECT_EQ(inl.line(0).line(), 42);
  EXPECT_EQ(str(p, p.function(static_cast<int>(inl.line(1).function_id()) - 1).name()),
            "server::handle_request(int)");
  EXPECT_EQ(s.value(1), 1572865);

  ASSERT_EQ(s.label_size(), 2);
  EXPECT_EQ(str(p, s.label(0).key()), "pid");
  EXPECT_EQ(s.label(0).num(), 100);
  EXPECT_EQ(str(p, s.label(1).key()), "comm");
  EXPECT_EQ(str(p, s.label(1).str()), "server");
}

TEST(PprofEncode, MappingsSaySymbolizationWasDone) {
  pb::Profile p = gunzip_message(encode_pprof(synthetic()).value());
  ASSERT_EQ(p.mapping_size(), 3);
  const pb::Mapping& server = p.mapping(0);
  EXPECT_EQ(server.memory_start(), 0x555555554000u);
  EXPECT_EQ(server.memory_limit(), 0x555555600000u);
  EXPECT_EQ(str(p, server.filename()), "/usr/bin/server");
  EXPECT_EQ(str(p, server.build_id()), "aa11bb22cc33");
  EXPECT_TRUE(server.has_functions());
  EXPECT_TRUE(server.has_filenames());
  EXPECT_TRUE(server.has_line_numbers());
  EXPECT_TRUE(server.has_inline_frames());
  const pb::Mapping& libstdcxx = p.mapping(2);
  EXPECT_EQ(libstdcxx.file_offset(), 0x9a000u);
  EXPECT_EQ(str(p, libstdcxx.build_id()), "");
  EXPECT_TRUE(libstdcxx.has_functions());
  EXPECT_FALSE(libstdcxx.has_line_numbers());
}

// drop_frames names leaves as pprof matches them; a file read keeps its
// own (another tool's profile, whose leaves are the program's functions,
// has none), and a recording built anew computes it.
TEST(PprofEncode, DropFramesAreTheLeavesAsPprofMatchesThemAndAFileKeepsItsOwn) {
  Recording r = synthetic();
  r.functions[0].name = "ns::(anonymous namespace)::pool::operator()(unsigned long)";
  pb::Profile p = gunzip_message(encode_pprof(r).value());
  EXPECT_EQ(str(p, p.drop_frames()),
            "calloc|ns::\\(anonymous namespace\\)::pool::operator\\(\\)|operator new");
  auto back = decode_pprof(encode_pprof(r).value());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->drop_frames, str(p, p.drop_frames()));
  back->drop_frames = "";  // as a profile of Go's own, with none
  EXPECT_EQ(gunzip_message(encode_pprof(*back).value()).drop_frames(), 0);
}

}  // namespace
}  // namespace allocscope
