// The pprof decoder: other tools' profiles, and malformed input (wrong
// messages, garbage, truncation, gzip bombs, flipped bits) refused cleanly.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "output/gzip.h"
#include "output/pprof.h"
#include "pprof_fixture.h"

namespace allocscope {
namespace {

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

}  // namespace
}  // namespace allocscope
