// The pprof encoder and decoder: round trip, profile.proto invariants,
// malformed input, and what Go's own pprof reads from our files.
#include "output/pprof.h"

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "output/gzip.h"
#include "output/pprof_sidecar.h"
#include "profile.pb.h"

namespace allocscope {
namespace {

namespace pb = perftools::profiles;

// Two processes, three mappings (one without a build id), an inlined call,
// an unsymbolized frame, five samples (one that rounds to all zeros).
Recording synthetic() {
  Recording r;
  r.rate = 512 * 1024;
  r.time_nanos = 1'700'000'000'123'456'789;
  r.duration_nanos = 2'500'000'000;
  r.default_metric = Metric::InuseSpace;
  r.counters = {
      {"samples", 17}, {"stacks_full", 0}, {"live_full", 2}, {"unmatched_frees", 5}, {"replaced_live", 1}};
  r.paths = {{"kernel", "6.1.0-56-amd64"}, {"probes", "classic uprobes and uretprobes (no uprobe sessions)"}};
  r.mappings = {
      {0x555555554000, 0x555555600000, 0, "/usr/bin/server", "aa11bb22cc33"},
      {0x7ffff7d80000, 0x7ffff7f00000, 0x28000, "/usr/lib/x86_64-linux-gnu/libc.so.6", "bb22"},
      {0x7ffff7a00000, 0x7ffff7c00000, 0x9a000, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", ""},
  };
  r.functions = {
      {"malloc", "malloc", ""},
      {"calloc", "calloc", ""},
      {"operator new(unsigned long)", "_Znwm", ""},
      {"server::handle_request(int)", "_ZN6server14handle_requestEi", "server.cc"},
      {"server::parse_header()", "_ZN6server12parse_headerEv", "parse.h"},
      {"main", "main", "main.cc"},
      {"worker_loop", "worker_loop", "worker.cc"},
  };
  r.locations = {
      {1, 0x7ffff7da1230, {{0, 0}}},
      {1, 0x7ffff7da2340, {{1, 0}}},
      {2, 0x7ffff7a9b450, {{2, 0}}},
      {0, 0x555555555560, {{4, 42}, {3, 120}}},  // parse_header inlined into handle_request
      {0, 0x555555555670, {{5, 10}}},
      {0, 0x555555555780, {{6, 55}}},
      {-1, 0x1234, {}},
  };
  auto sample = [](std::vector<uint32_t> locs, uint32_t pid, std::string comm, StackTotals t) {
    return RecSample{std::move(locs), pid, std::move(comm), t, {}};
  };
  r.samples = {
      sample({0, 3, 4}, 100, "server", {3.4, 1572864.5, 1.6, 524288.49, 3, 1}),
      sample({2, 3, 4}, 100, "server", {1, 600000.5, 1, 600000.5, 1, 1}),
      sample({1, 4}, 100, "server", {2, 1048576, 0, 0, 2, 0}),
      sample({0, 5}, 200, "worker", {10.5, 5242880, 10.5, 5242880, 10, 10}),
      sample({0, 6, 5}, 200, "worker", {0.4, 0.4, 0.2, 0.2, 0, 0}),
  };
  r.samples[3].ns_pid = 7;  // a worker in a container: pid 7 there
  r.samples[4].ns_pid = 7;
  return r;
}

StackTotals rounded(const StackTotals& t) {
  return {std::round(t.alloc_objects),
          std::round(t.alloc_bytes),
          std::round(t.live_objects),
          std::round(t.live_bytes),
          t.samples,
          t.live_samples};
}

pb::Profile gunzip_message(const std::string& gz) {
  google::protobuf::io::ArrayInputStream in(gz.data(), static_cast<int>(gz.size()));
  google::protobuf::io::GzipInputStream unzipped(&in, google::protobuf::io::GzipInputStream::GZIP);
  pb::Profile p;
  EXPECT_TRUE(p.ParseFromZeroCopyStream(&unzipped));
  return p;
}

const std::string& str(const pb::Profile& p, int64_t i) { return p.string_table(static_cast<int>(i)); }

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

// A hand-made profile as another tool might write it: raw (not gzipped),
// other sample type order, arbitrary ids, no default_sample_type, no
// samples/live_samples types.
TEST(PprofDecode, ReadsOtherOrdersAndRawProtobuf) {
  pb::Profile p;
  for (const char* s : {"", "inuse_space", "bytes", "alloc_space", "inuse_objects", "count", "alloc_objects",
                        "f", "/bin/x", "pid", "comm", "x", "bytes_label"})
    p.add_string_table(s);
  auto type = [&](int64_t t, int64_t u) {
    pb::ValueType* vt = p.add_sample_type();
    vt->set_type(t);
    vt->set_unit(u);
  };
  type(1, 2);  // inuse_space
  type(3, 2);  // alloc_space
  type(4, 5);  // inuse_objects
  type(6, 5);  // alloc_objects
  p.set_period(4096);
  pb::Mapping* m = p.add_mapping();
  m->set_id(77);
  m->set_filename(8);
  pb::Function* f = p.add_function();
  f->set_id(900);
  f->set_name(7);
  pb::Location* l = p.add_location();
  l->set_id(5000);
  l->set_mapping_id(77);
  l->set_address(0x42);
  l->add_line()->set_function_id(900);
  pb::Sample* s = p.add_sample();
  s->add_location_id(5000);
  for (int64_t v : {40, 100, 4, 10}) s->add_value(v);
  pb::Label* pid = s->add_label();
  pid->set_key(9);
  pid->set_num(321);
  pb::Label* comm = s->add_label();
  comm->set_key(10);
  comm->set_str(11);
  pb::Label* other = s->add_label();  // Go's heap profiles label "bytes"
  other->set_key(12);
  other->set_num(8);

  auto d = decode_pprof(p.SerializeAsString());
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->rate, 4096u);
  EXPECT_EQ(d->default_metric, Metric::AllocObjects);  // the last type, as pprof defaults
  ASSERT_EQ(d->mappings.size(), 1u);
  EXPECT_EQ(d->mappings[0].file, "/bin/x");
  ASSERT_EQ(d->locations.size(), 1u);
  EXPECT_EQ(d->locations[0].mapping, 0);
  ASSERT_EQ(d->locations[0].lines.size(), 1u);
  EXPECT_EQ(d->functions[d->locations[0].lines[0].function].name, "f");
  ASSERT_EQ(d->samples.size(), 1u);
  const RecSample& rs = d->samples[0];
  EXPECT_EQ(rs.locations, std::vector<uint32_t>{0});
  EXPECT_EQ(rs.pid, 321u);
  EXPECT_EQ(rs.comm, "x");
  EXPECT_EQ(rs.totals.alloc_objects, 10);
  EXPECT_EQ(rs.totals.alloc_bytes, 100);
  EXPECT_EQ(rs.totals.live_objects, 4);
  EXPECT_EQ(rs.totals.live_bytes, 40);
  EXPECT_EQ(rs.totals.samples, 0u);
  EXPECT_EQ(rs.totals.live_samples, 0u);
  EXPECT_TRUE(d->counters.empty());
}

// Every way a parsed message can still be wrong, each named in the error.
TEST(PprofDecode, ErrorsNameTheCause) {
  const pb::Profile good = gunzip_message(encode_pprof(synthetic()).value());
  auto error_of = [](const pb::Profile& p) {
    auto d = decode_pprof(p.SerializeAsString());
    return d ? std::string("decoded") : d.error().message;
  };
  auto expect_error = [&](const char* what, auto&& mutate, const std::string& cause) {
    pb::Profile p = good;
    mutate(p);
    std::string e = error_of(p);
    EXPECT_EQ(e.rfind("not a pprof profile: ", 0), 0u) << what << ": " << e;
    EXPECT_NE(e.find(cause), std::string::npos) << what << ": " << e;
  };
  expect_error(
      "string 0", [](pb::Profile& p) { p.set_string_table(0, "x"); }, "string_table[0]");
  expect_error(
      "string index", [](pb::Profile& p) { p.mutable_function(0)->set_name(1 << 20); }, "function name");
  expect_error(
      "negative string", [](pb::Profile& p) { p.mutable_mapping(1)->set_build_id(-1); }, "build_id");
  expect_error(
      "location id", [](pb::Profile& p) { p.mutable_sample(2)->set_location_id(0, 99); },
      "unknown location id 99");
  expect_error(
      "function id", [](pb::Profile& p) { p.mutable_location(0)->mutable_line(0)->set_function_id(0); },
      "unknown function id 0");
  expect_error(
      "mapping id", [](pb::Profile& p) { p.mutable_location(0)->set_mapping_id(4); }, "unknown mapping id 4");
  expect_error(
      "duplicate id", [](pb::Profile& p) { p.mutable_function(1)->set_id(1); }, "duplicate function id 1");
  expect_error(
      "zero id", [](pb::Profile& p) { p.mutable_location(3)->set_id(0); }, "location with id 0");
  expect_error(
      "values", [](pb::Profile& p) { p.mutable_sample(1)->add_value(1); }, "7 values for 6 sample types");
  expect_error(
      "unit", [](pb::Profile& p) { p.mutable_sample_type(1)->set_unit(p.sample_type(0).unit()); },
      "alloc_space in count");
  expect_error(
      "negative count", [](pb::Profile& p) { p.mutable_sample(0)->set_value(4, -1); }, "negative");
  expect_error(
      "period", [](pb::Profile& p) { p.set_period(-5); }, "negative period");
  expect_error(
      "pid", [](pb::Profile& p) { p.mutable_sample(0)->mutable_label(0)->set_num(-1); }, "pid label");
  expect_error(
      "cpu profile",
      [](pb::Profile& p) {
        p.clear_sample_type();
        p.clear_sample();
        p.add_string_table("cpu");
        p.add_string_table("nanoseconds");
        pb::ValueType* vt = p.add_sample_type();
        vt->set_type(p.string_table_size() - 2);
        vt->set_unit(p.string_table_size() - 1);
      },
      "no alloc_objects");
  EXPECT_EQ(error_of(good), "decoded");
}

TEST(PprofDecode, RejectsGarbageWithoutCrashing) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("\x1f"), std::string_view("\x1f\x8b"),
        std::string_view("hello, world"), std::string_view("\x1f\x8b\x08\x00garbage")}) {
    auto d = decode_pprof(bad);
    ASSERT_FALSE(d) << bad;
    EXPECT_EQ(d.error().message.rfind("not a pprof profile: ", 0), 0u) << d.error();
  }
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (i % 2 == 0 && bytes.size() >= 2)  // half of them look gzipped
      bytes[0] = '\x1f', bytes[1] = '\x8b';
    auto d = decode_pprof(bytes);
    if (!d) {
      EXPECT_EQ(d.error().message.rfind("not a pprof profile: ", 0), 0u) << d.error();
    }
  }
}

TEST(PprofDecode, ATruncatedFileIsAnError) {
  const std::string gz = encode_pprof(synthetic()).value();
  for (size_t n = 0; n < gz.size(); ++n) {
    auto d = decode_pprof(std::string_view(gz).substr(0, n));
    ASSERT_FALSE(d) << "cut at " << n << " of " << gz.size();
  }
  auto half = decode_pprof(std::string_view(gz).substr(0, gz.size() / 2));
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().message, "not a pprof profile: gzip: truncated");
  // Raw protobuf has no end marker: a cut at a field boundary can parse, but
  // nothing may crash and what decodes must still be consistent.
  const std::string raw = gunzip_message(gz).SerializeAsString();
  for (size_t n = 0; n < raw.size(); ++n) {
    auto d = decode_pprof(std::string_view(raw).substr(0, n));
    for (const RecSample& s : d ? d->samples : std::vector<RecSample>{}) {
      for (uint32_t loc : s.locations) {
        ASSERT_LT(loc, d->locations.size());
      }
    }
  }
}

// A gzip bomb: 300 MiB of zeros in 300 KiB, over the 256-MiB bound of an
// inflated profile. Refused in one line, the inflated bytes never held past
// the bound (a 1.15-GB bomb once ended in std::bad_alloc under a 4-GiB
// address-space limit); a zlib stream of one chunk past the bound too.
TEST(PprofDecode, AGzipBombIsRefusedAtItsBound) {
  std::string zeros(size_t{300} << 20, '\0');
  auto bomb = gzip(zeros);
  zeros = std::string();
  ASSERT_TRUE(bomb);
  EXPECT_LT(bomb->size(), size_t{2} << 20);  // 1.3 MiB at the fastest level
  auto d = decode_pprof(*bomb);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message, "not a pprof profile: gzip: over 256 MiB uncompressed");
  auto small = gzip(std::string(100000, 'x'));
  ASSERT_TRUE(small);
  auto cut = gunzip(*small, 99999);
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "gzip: over 0 MiB uncompressed");
  auto whole = gunzip(*small, 100000);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->size(), 100000u);
}

TEST(PprofDecode, FlippedBitsNeverCrash) {
  const std::string gz = encode_pprof(synthetic()).value();
  const std::string raw = gunzip_message(gz).SerializeAsString();
  std::mt19937_64 rng(777);
  for (const std::string* original : {&gz, &raw})
    for (int i = 0; i < 3000; ++i) {
      std::string bytes = *original;
      for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips)
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      auto d = decode_pprof(bytes);
      if (!d) {
        EXPECT_EQ(d.error().message.rfind("not a pprof profile: ", 0), 0u) << d.error();
      }
    }
}

// ---- Go's pprof reads our files ----

struct GoPprof {
  std::filesystem::path dir;
  std::filesystem::path file;

  // Go writes its cache and pprof its history under HOME: keep both in a
  // temporary directory, and never let go download a toolchain.
  // `symbolize`: pprof's own pass over names (its demangler) as users get it.
  std::string run(const std::string& args, bool symbolize = false) const {
    std::string cmd = "cd '" + dir.string() + "' && HOME='" + dir.string() + "' GOCACHE='" +
                      (dir / "gocache").string() + "' GOFLAGS= GOTOOLCHAIN=local GOPROXY=off go tool pprof " +
                      (symbolize ? "" : "-symbolize=none ") + args + " '" + file.string() + "' 2>&1";
    std::string out;
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
      int status = pclose(pipe);
      EXPECT_EQ(status, 0) << cmd << "\n" << out;
    }
    return out;
  }
};

bool have_go() { return std::system("command -v go >/dev/null 2>&1") == 0; }

GoPprof write_profile(const Recording& r) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "allocscope-pprof-XXXXXX").string();
  const char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  GoPprof go{dir, std::filesystem::path(dir) / "heap.pb.gz"};
  std::ofstream(go.file, std::ios::binary) << encode_pprof(r, "allocscope 0.1.0").value();
  return go;
}

// Column sums of `pprof -raw`: the "v1 v2 ...: loc loc" lines under Samples.
std::vector<int64_t> raw_column_sums(const std::string& out, size_t columns) {
  std::vector<int64_t> sums(columns, 0);
  std::istringstream in(out);
  bool in_samples = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Samples:") {
      in_samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0) break;
    size_t colon = line.find(':');
    if (!in_samples || colon == std::string::npos || line.find('[') != std::string::npos) continue;
    std::istringstream values(line.substr(0, colon));
    for (size_t i = 0; i < columns; ++i) {
      int64_t v = 0;
      values >> v;
      sums[i] += v;
    }
  }
  return sums;
}

int64_t top_total(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(of (\d+)B? total)"))) return -1;
  return std::stoll(m[1]);
}

TEST(PprofGoTool, ReadsTotalsAndFunctions) {
  if (!have_go()) GTEST_SKIP() << "go is not installed (golang-go, installed by dev.sh)";
  const Recording r = synthetic();
  const GoPprof go = write_profile(r);
  std::array<int64_t, 6> want{};
  for (const RecSample& s : r.samples) {
    StackTotals t = rounded(s.totals);
    for (size_t i = 0; i < 6; ++i)
      want[i] += std::array<int64_t, 6>{
          static_cast<int64_t>(t.alloc_objects), static_cast<int64_t>(t.alloc_bytes),
          static_cast<int64_t>(t.live_objects),  static_cast<int64_t>(t.live_bytes),
          static_cast<int64_t>(t.samples),       static_cast<int64_t>(t.live_samples)}[i];
  }

  const std::string raw = go.run("-raw");
  EXPECT_NE(raw.find("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] "
                     "samples/count live_samples/count"),
            std::string::npos)
      << raw;
  EXPECT_NE(raw.find("PeriodType: space bytes"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Period: 524288"), std::string::npos) << raw;
  // A handful of comments, and no label but pid and comm: allocscope's own
  // figures are not shown to pprof users.
  size_t comment_lines = 0;
  for (size_t at = raw.find("Comment: "); at != std::string::npos; at = raw.find("Comment: ", at + 1))
    ++comment_lines;
  EXPECT_LE(comment_lines, 3u) << raw;
  EXPECT_EQ(raw.find("as."), std::string::npos) << raw;
  EXPECT_EQ(raw.find("f64bits"), std::string::npos) << raw;
  std::vector<int64_t> sums = raw_column_sums(raw, 6);
  EXPECT_EQ(sums, std::vector<int64_t>(want.begin(), want.end())) << raw;

  const std::string alloc = go.run("-top -sample_index=alloc_space -unit=byte");
  EXPECT_EQ(top_total(alloc), want[1]) << alloc;
  const std::string inuse = go.run("-top -sample_index=inuse_space -unit=byte");
  EXPECT_EQ(top_total(inuse), want[3]) << inuse;
  const std::string objects = go.run("-top -sample_index=alloc_objects");
  EXPECT_EQ(top_total(objects), want[0]) << objects;
  const std::string samples = go.run("-top -sample_index=samples");
  EXPECT_EQ(top_total(samples), want[4]) << samples;

  const std::string traces = go.run("-traces -sample_index=alloc_space");
  for (const char* name : {"server::handle_request", "server::parse_header", "main", "worker_loop",
                           "comm:  server", "comm:  worker", "pid:  200"})
    EXPECT_NE(traces.find(name), std::string::npos) << name << "\n" << traces;
  std::filesystem::remove_all(go.dir);
}

// The allocator entry points, each sample's leaf, are the profile's
// drop_frames: pprof puts flat bytes on their callers, as in Go's own heap
// profiles, and never shows them.
TEST(PprofGoTool, FlatBytesLandOnTheAllocatorsCallers) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  const Recording r = synthetic();
  pb::Profile p = gunzip_message(encode_pprof(r).value());
  EXPECT_EQ(str(p, p.drop_frames()), "calloc|malloc|operator new");
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -nodefraction=0 -sample_index=alloc_space -unit=byte");
  // flat: parse_header (inlined, innermost) 1572865 + 600001 (malloc's and
  // operator new's), main 1048576 (calloc's).
  EXPECT_NE(top.find("2172866B 25.67% 87.61%   2172866B"), std::string::npos) << top;
  EXPECT_NE(top.find("1048576B 12.39%"), std::string::npos) << top;
  for (const char* allocator : {"malloc", "calloc", "operator new"})
    EXPECT_EQ(top.find(allocator), std::string::npos) << allocator << "\n" << top;
  std::filesystem::remove_all(go.dir);
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

// Go's runtime frames between the program and its allocator go too, as in
// Go's own heap profiles; those outside the program's first frame stay.
TEST(PprofGoTool, GosRuntimeFramesUnderTheProgramGo) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  Recording r;
  r.rate = 512 * 1024;
  r.mappings = {{0x400000, 0x500000, 0, "/usr/bin/service", ""}};
  r.functions = {{"runtime.mallocgc", "runtime.mallocgc", ""},
                 {"runtime.makeslice", "runtime.makeslice", ""},
                 {"main.site", "main.site", "main.go"},
                 {"main.main", "main.main", "main.go"},
                 {"runtime.main", "runtime.main", "proc.go"}};
  for (uint32_t f = 0; f < 5; ++f) r.locations.push_back({0, 0x400000 + 16 * f, {{f, 0}}});
  r.samples.push_back(RecSample{{0, 1, 2, 3, 4}, 1, "service", {1, 4096, 1, 4096, 1, 1}, {}});
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -nodefraction=0 -sample_index=alloc_space -unit=byte");
  EXPECT_NE(top.find("4096B   100%   100%      4096B   100%  main.site"), std::string::npos) << top;
  EXPECT_NE(top.find("runtime.main"), std::string::npos) << top;
  EXPECT_EQ(top.find("runtime.makeslice"), std::string::npos) << top;
  std::filesystem::remove_all(go.dir);
}

// Python's names in angle brackets (a module's code, a comprehension, a
// nested function) keep them through pprof's demangler: they carry no
// system name for it to simplify to nothing.
TEST(PprofGoTool, NamesInAngleBracketsSurviveItsDemangler) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  Recording r = synthetic();
  r.functions.push_back({"<module>", "", "app.py"});
  r.functions.push_back({"outer.<locals>.inner", "", "app.py"});
  r.locations.push_back({-1, 0x8000000000000001, {{uint32_t(r.functions.size() - 2), 1}}});
  r.locations.push_back({-1, 0x8000000000000002, {{uint32_t(r.functions.size() - 1), 7}}});
  uint32_t module = uint32_t(r.locations.size() - 2), inner = uint32_t(r.locations.size() - 1);
  r.samples.push_back(RecSample{{0, inner, module}, 300, "python3", {1, 4096, 1, 4096, 1, 1}, {}});
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -cum -nodefraction=0 -sample_index=alloc_space", true);
  EXPECT_NE(top.find(" <module>\n"), std::string::npos) << top;
  EXPECT_NE(top.find(" outer.<locals>.inner\n"), std::string::npos) << top;
  EXPECT_EQ(top.find("<unknown>"), std::string::npos) << top;
  std::filesystem::remove_all(go.dir);
}

}  // namespace
}  // namespace allocscope
