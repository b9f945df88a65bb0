// The pprof round trip of the event path's end (record/view/output_writer):
// what record renders is what `report` renders from the file record saved,
// estimates rounded as the file holds them.
#include "record/view/output_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <vector>

#include "output/outputs.h"
#include "output/pprof.h"

namespace allocscope {
namespace {

[[gnu::noinline]] void a_site() { asm volatile(""); }

TEST(SavedRecording, IsWhatReportReadsFromTheSavedFile) {
  constexpr uint64_t kRate = 4096;
  Profile profile(kRate, 16, 1 << 10);
  std::vector<uint64_t> ips{reinterpret_cast<uint64_t>(&a_site) + 1};
  AllocSample a;
  a.pid = uint32_t(getpid());
  a.fn = AS_FN_MALLOC;
  a.size = 1000;  // below the rate: weighted by its chance, a fraction of a byte
  a.ips = ips;
  for (uint64_t i = 0; i < 3; ++i) {
    a.addr = 0x1000 + i * 0x1000;
    a.offset = i * 7;
    profile.on_alloc(a);
  }
  Symbolizer symbolizer;
  StackOrigin origin{.pid = a.pid, .comm = "unit", .mappings = symbolizer.resolve(pid_t(a.pid), ips)};
  RecordingMeta meta;
  meta.rate = kRate;
  Recording built = build_recording(profile, symbolizer, meta, {origin});
  Recording saved = saved_recording(profile, symbolizer, meta, {origin});
  ASSERT_EQ(built.samples.size(), 1u);
  ASSERT_EQ(saved.samples.size(), 1u);
  double bytes = built.samples[0].totals.alloc_bytes;
  EXPECT_NE(bytes, std::round(bytes)) << "an estimate with a fraction, which the file cannot hold";
  EXPECT_EQ(saved.samples[0].totals.alloc_bytes, std::round(bytes));

  // `report FILE`: the file decoded, rendered as record rendered it.
  auto file = encode_pprof(saved);
  ASSERT_TRUE(file.has_value()) << file.error();
  auto reported = decode_pprof(*file);
  ASSERT_TRUE(reported.has_value()) << reported.error();
  for (Format f : {Format::Folded, Format::Json, Format::Svg}) {
    auto from_record = render(saved, f, {});
    auto from_report = render(*reported, f, {});
    ASSERT_TRUE(from_record && from_report);
    EXPECT_EQ(*from_record, *from_report) << int(f);
    EXPECT_NE(from_record->find("a_site"), std::string::npos) << int(f);
  }
}

}  // namespace
}  // namespace allocscope
