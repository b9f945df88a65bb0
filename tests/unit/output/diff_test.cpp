// report --diff's table, JSON and flame graph: verdicts only where a change
// is beyond sampling noise, Holm over every row, per-second comparisons.
#include "output/diff.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace allocscope {
namespace {

constexpr uint64_t kRate = 64 * 1024;

// `samples` sampled allocations of 64 bytes at kRate.
StackTotals sampled(int samples) {
  StackTotals t;
  for (int i = 0; i < samples; ++i) t.alloc_stats.add_sample(64, 0, kRate);
  t.samples = uint64_t(samples);
  t.alloc_bytes = t.alloc_stats.bytes_estimate();
  t.alloc_objects = t.alloc_stats.objects_estimate();
  return t;
}

// One program, four call sites of malloc with these sample counts.
Recording program(std::vector<int> counts, uint32_t pid, double seconds = 1) {
  Recording r;
  r.rate = kRate;
  r.duration_nanos = int64_t(seconds * 1e9);
  r.functions = {{"malloc", "malloc", ""}, {"main", "main", ""}};
  r.locations = {{-1, 0x10, {{0, 0}}}, {-1, 0x20, {{1, 0}}}};
  for (size_t i = 0; i < counts.size(); ++i) {
    std::string site = "site_" + std::to_string(i);
    r.functions.push_back({site, site, ""});
    r.locations.push_back({-1, 0x100 + i, {{uint32_t(r.functions.size() - 1), 0}}});
    r.samples.push_back(
        RecSample{{0, uint32_t(r.locations.size() - 1), 1}, pid, "prog", sampled(counts[i]), {}});
  }
  return r;
}

const DiffRow* row(const DiffTable& t, const std::string& name) {
  for (const DiffRow& r : t.rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(Diff, NoiseGetsNoVerdict) {
  // Counts as two runs of one program give them: Poisson noise of about sqrt(n).
  Recording base = program({10, 40, 3, 100}, 11), now = program({13, 33, 6, 112}, 22);
  DiffTable t = diff_table(base, now, RenderOptions{});
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.changed, 0u);
  for (const DiffRow& r : t.rows) {
    EXPECT_EQ(r.verdict, 0) << r.name;
    EXPECT_LE(r.d.interval.lo, r.d.change);
    EXPECT_GE(r.d.interval.hi, r.d.change);
  }
  EXPECT_NE(render_diff_table(base, now, RenderOptions{}).find("0 of 4 changed beyond sampling noise"),
            std::string::npos);
}

TEST(Diff, GrowthBeyondNoiseIsCalled) {
  Recording base = program({10, 40, 3, 100}, 11), now = program({70, 38, 3, 95}, 22);
  RenderOptions o;
  DiffTable t = diff_table(base, now, o);
  EXPECT_EQ(t.changed, 1u);
  ASSERT_FALSE(t.rows.empty());
  EXPECT_EQ(t.rows[0].name, "site_0");  // verdicts first
  EXPECT_EQ(t.rows[0].verdict, 1);
  EXPECT_GT(t.rows[0].d.interval.lo, 0);
  EXPECT_NEAR(t.rows[0].d.change, 60.0 * 64 / (1 - std::exp(-64.0 / kRate)), 1);
  EXPECT_GE(t.rows[0].p_adjusted, t.rows[0].d.p_value);

  auto j = nlohmann::json::parse(render_diff_json(base, now, o));
  EXPECT_EQ(j["correction"], "holm");
  EXPECT_EQ(j["compared"], 4);
  EXPECT_EQ(j["changed"], 1);
  EXPECT_EQ(j["rows"][0]["verdict"], "grew");
  EXPECT_TRUE(j["rows"][1]["verdict"].is_null());

  // The flame graph: site_0 red, site_3's small drop grey and said to be noise.
  std::string svg = render_diff_svg(base, now, o);
  EXPECT_NE(svg.find("1 of 4 stacks changed beyond sampling noise"), std::string::npos);
  size_t site3 = svg.find("<title>site_3\n");
  ASSERT_NE(site3, std::string::npos);
  EXPECT_NE(svg.substr(site3, svg.find("</title>", site3) - site3).find("within sampling noise"),
            std::string::npos);
  // Each stack's leaf (malloc) tells its change, interval and adjusted p-value.
  size_t notes = 0;
  for (size_t at = svg.find("p (Holm)"); at != std::string::npos; at = svg.find("p (Holm)", at + 1)) ++notes;
  EXPECT_EQ(notes, 4u);
}

// Twice the samples in twice the time: growth in total, none per second.
TEST(Diff, PerSecondComparesRates) {
  Recording base = program({50, 5}, 11, 1.0), now = program({100, 10}, 22, 2.0);
  RenderOptions o;
  EXPECT_EQ(row(diff_table(base, now, o), "site_0")->verdict, 1);
  o.per_second = true;
  DiffTable t = diff_table(base, now, o);
  EXPECT_EQ(t.unit, "/s");
  EXPECT_EQ(t.changed, 0u);
  EXPECT_NEAR(row(t, "site_0")->d.change, 0, 1e-6);
}

// Rows by process merge a program's runs whatever their pids.
TEST(Diff, ProcessesAreComparedByName) {
  RenderOptions o;
  o.top_by = TopBy::Process;
  DiffTable t = diff_table(program({10, 10}, 11), program({10, 10}, 22), o);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0].name, "prog");
  EXPECT_DOUBLE_EQ(t.rows[0].d.change, 0);
}

// Two builds of one program under different names: their stacks meet under
// one process frame, and the table, the JSON and the flame graph say so.
// Recordings of several programs are compared name by name, as they are.
TEST(Diff, OneProgramUnderTwoNamesIsComparedAsOne) {
  Recording base = program({10, 40, 3, 100}, 11), now = program({10, 40, 3, 100}, 22);
  for (RecSample& s : now.samples) s.comm = "prog-v2";
  EXPECT_EQ(joined_program(base, now), "prog -> prog-v2");
  RenderOptions o;
  o.top_by = TopBy::Stack;
  DiffTable t = diff_table(base, now, o);
  EXPECT_EQ(t.rows.size(), 4u) << "the stacks of both sides did not meet";
  EXPECT_EQ(t.changed, 0u);
  EXPECT_NE(render_diff_table(base, now, o).find("the programs' names differ (prog -> prog-v2)"),
            std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(render_diff_json(base, now, o))["programs_joined"], "prog -> prog-v2");
  std::string svg = render_diff_svg(base, now, o);
  EXPECT_NE(svg.find("0 of 4 stacks changed"), std::string::npos);
  EXPECT_NE(svg.find("compared as one program"), std::string::npos);

  Recording two = program({10, 40, 3, 100}, 22);  // another program beside prog-v2
  two.samples.push_back(now.samples.front());
  EXPECT_EQ(joined_program(base, two), "");
  EXPECT_EQ(joined_program(base, program({1}, 33)), "") << "same name: nothing to join";
  EXPECT_TRUE(nlohmann::json::parse(render_diff_json(base, base, o))["programs_joined"].is_null());
}

}  // namespace
}  // namespace allocscope
