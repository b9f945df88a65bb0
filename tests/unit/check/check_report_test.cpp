// allocscope check's report from facts built here: what it says of a Debian
// 12 kernel, of a kernel too old, and of a program the kernel refused.
#include "check/check_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace allocscope {
namespace {

CheckReport debian12() {
  CheckReport r;
  r.kernel.release = "6.1.0-56-amd64";
  for (FeatureState& s : r.kernel.states) s = {Presence::Present, ""};
  for (Feature f : {Feature::UprobeMulti, Feature::UprobeSession, Feature::NopEmulation})
    r.kernel.states[size_t(f)] = {Presence::Missing, "attach: Invalid argument"};
  r.privileges = parse_privileges("Uid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n");
  r.trials = {{"record, sampled (default)", true, "", 500, {}},
              {"agent and record --all", true, "", 300, {}}};
  return r;
}

TEST(CheckReport, Debian12RecordsWithClassicProbesAndSaysWhatItLacks) {
  CheckReport r = debian12();
  std::string text = render_check(r, false);
  EXPECT_TRUE(can_record(r));
  for (const char* words :
       {"kernel        6.1.0-56-amd64", "no   uprobe sessions (6.13)",
        "instead: classic uprobes and uretprobes: a return probe on every allocating call",
        "yes  bpf_loop (5.17)", "ok    record, sampled (default) (500 ms)",
        "record: yes, with classic uprobes (no uprobe sessions here)", "agent:  yes\n"})
    EXPECT_NE(text.find(words), std::string::npos) << words << " in:\n" << text;
  EXPECT_EQ(text.find("found:"), std::string::npos) << "details are for -v";
  EXPECT_NE(render_check(r, true).find("found: attach: Invalid argument"), std::string::npos);
}

TEST(CheckReport, OldKernelIsNoWithTheReason) {
  CheckReport r = debian12();
  r.kernel.release = "5.10.0-35-amd64";
  r.kernel.states[size_t(Feature::Loop)] = {Presence::Missing, "bpf_loop is unknown to this kernel"};
  r.trials.clear();  // not loaded where a required feature is missing
  std::string text = render_check(r, false);
  EXPECT_FALSE(can_record(r));
  EXPECT_NE(text.find("record: no: this kernel (5.10.0-35-amd64) lacks bpf_loop (5.17)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("agent:  no"), std::string::npos);
}

TEST(CheckReport, RefusedProgramIsNoAndPointsToTheLog) {
  CheckReport r = debian12();
  r.trials[1] = {"agent and record --all", false, "load BPF programs: Permission denied", 80, {}};
  std::string text = render_check(r, false);
  EXPECT_FALSE(can_record(r));
  EXPECT_NE(text.find("FAIL  agent and record --all: load BPF programs: Permission denied"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("record: no: the kernel refused"), std::string::npos) << text;
}

TEST(CheckReport, UserWithoutCapabilitiesIsToldWhatToGrant) {
  CheckReport r = debian12();
  r.privileges = parse_privileges("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
  EXPECT_NE(render_check(r, false).find("needs root, or CAP_BPF and CAP_PERFMON"), std::string::npos);
}

TEST(CheckReport, WithoutPrivilegesNothingIsProbed) {
  CheckReport r = debian12();
  r.privileges = parse_privileges("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
  for (FeatureState& s : r.kernel.states) s = {Presence::Unknown, "loading BPF needs root or CAP_BPF", 1};
  r.trials.clear();
  std::string text = render_check(r, false);
  EXPECT_NE(text.find("kernel features: not probed (loading BPF needs root or CAP_BPF)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("yes  "), std::string::npos) << "no feature is claimed:\n" << text;
  EXPECT_NE(
      text.find(
          "record: no: loading BPF needs root, or CAP_BPF and CAP_PERFMON: run `sudo allocscope check`"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("`allocscope check` tells"), std::string::npos) << "check points at itself:\n" << text;
}

// Without privilege, the path that needs none: the preload library's.
TEST(CheckReport, SaysWhetherACommandCanBeRecordedWithoutBpf) {
  CheckReport r = debian12();
  r.preload_library = "/usr/lib/x86_64-linux-gnu/allocscope/liballocscope-preload.so";
  std::string text = render_check(r, false);
  EXPECT_NE(text.find("record -- CMD without BPF (--no-bpf, the default without privilege): yes, in process "
                      "through /usr/lib/x86_64-linux-gnu/allocscope/liballocscope-preload.so"),
            std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(render_check_json(r))["record_without_bpf"], true);
  r.preload_library.clear();
  r.preload_refusal = "liballocscope-preload.so is not installed";
  text = render_check(r, false);
  EXPECT_NE(
      text.find("without BPF (--no-bpf, the default without privilege): no: liballocscope-preload.so is not "
                "installed"),
      std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(render_check_json(r))["record_without_bpf"], false);
}

TEST(CheckReport, JsonHasEveryFeatureByKey) {
  CheckReport r = debian12();
  r.kernel.states[size_t(Feature::PushEmulation)] = {Presence::Unknown, "fork: Resource unavailable"};
  auto doc = nlohmann::json::parse(render_check_json(r));
  EXPECT_EQ(doc["kernel"], "6.1.0-56-amd64");
  EXPECT_EQ(doc["features"].size(), kFeatureCount);
  EXPECT_EQ(doc["features"]["uprobe_session"]["present"], false);
  EXPECT_EQ(doc["features"]["uprobe_session"]["first_kernel"], "6.13");
  EXPECT_EQ(doc["features"]["bpf_loop"]["present"], true);
  EXPECT_TRUE(doc["features"]["push_emulation"]["present"].is_null());
  EXPECT_EQ(doc["record"], true);
  EXPECT_EQ(doc["trials"].size(), 2u);
}

}  // namespace
}  // namespace allocscope
