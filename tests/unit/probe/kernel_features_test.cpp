// What allocscope makes of the kernel's features: the one-line refusal, the
// forced fallbacks, the probe mode and placement they lead to. Pure logic on
// KernelFeatures values built here (the probing itself runs in the
// integration tests and the kernel matrix).
#include "probe/features/kernel_features.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "probe/features/probe_choice.h"

namespace allocscope {
namespace {

KernelFeatures all_present() {
  KernelFeatures k;
  k.release = "6.18.1-test";
  for (FeatureState& s : k.states) s = {Presence::Present, ""};
  return k;
}

TEST(KernelFeatures, EveryFeatureHasOneSpecInOrder) {
  for (size_t i = 0; i < kFeatureCount; ++i) {
    const FeatureSpec& s = feature_specs()[i];
    EXPECT_EQ(size_t(s.feature), i) << s.key;
    EXPECT_NE(std::string(s.first_kernel), "") << s.key;
    EXPECT_EQ(std::string(s.without).empty(), s.required) << s.key << ": a fallback exactly when optional";
  }
}

TEST(KernelFeatures, NothingMissingNothingToSay) { EXPECT_EQ(missing_features_message(all_present()), ""); }

// Debian 11's 5.10: what it lacks, and the first kernel that has it all.
TEST(KernelFeatures, OldKernelIsRefusedInOneLineNamingWhatAndWhen) {
  KernelFeatures k = all_present();
  k.release = "5.10.0-35-amd64";
  for (Feature f : {Feature::TaskStorage, Feature::Cookies, Feature::Loop, Feature::FindVma})
    k.states[size_t(f)] = {Presence::Missing, "unknown to this kernel"};
  std::string m = missing_features_message(k);
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  for (const char* words : {"5.10.0-35-amd64", "task storage in tracing programs (5.11)",
                            "BPF cookies on uprobes (5.15)", "bpf_loop (5.17)", "Linux 5.17 or newer"})
    EXPECT_NE(m.find(words), std::string::npos) << words << " in: " << m;
  EXPECT_EQ(k.missing_required().size(), 4u);
}

// One required feature missing still names the newest first kernel of all
// the required ones: that is the kernel that has everything.
TEST(KernelFeatures, NeededKernelIsTheNewestRequiredOne) {
  KernelFeatures k = all_present();
  k.states[size_t(Feature::RingBuffer)] = {Presence::Missing, ""};
  EXPECT_NE(missing_features_message(k).find("Linux 5.17 or newer"), std::string::npos);
}

// Probes refused for want of privileges tell nothing of the kernel.
TEST(KernelFeatures, RefusedProbesAskForPrivilegesNotANewerKernel) {
  KernelFeatures k = all_present();
  k.states[size_t(Feature::Loop)] = {Presence::Unknown, "probe bpf_loop: Operation not permitted", EPERM};
  EXPECT_TRUE(k.unprivileged());
  EXPECT_TRUE(k.missing_required().empty());
  std::string m = missing_features_message(k);
  EXPECT_NE(m.find("CAP_BPF"), std::string::npos) << m;
  EXPECT_EQ(m.find("newer"), std::string::npos) << m;
}

TEST(KernelFeatures, ForcedFallbacksAreOptionalFeaturesOnly) {
  KernelFeatures k = all_present();
  std::vector<std::string> unknown = force_fallbacks(k, "uprobe_session,,bogus,bpf_loop,nop_emulation");
  EXPECT_EQ(unknown, (std::vector<std::string>{"bogus", "bpf_loop"}));
  EXPECT_FALSE(k.has(Feature::UprobeSession));
  EXPECT_FALSE(k.has(Feature::NopEmulation));
  EXPECT_TRUE(k.has(Feature::Loop));
  EXPECT_NE(k.state(Feature::UprobeSession).detail.find("forced"), std::string::npos);
}

TEST(KernelFeatures, ProbeModeFollowsSessionsAndUprobeMulti) {
  KernelFeatures k = all_present();
  EXPECT_EQ(choose_probe_mode(k, ProbeMode::Auto).value(), ProbeMode::Session);
  EXPECT_EQ(choose_probe_mode(k, ProbeMode::Classic).value(), ProbeMode::Classic);
  k.states[size_t(Feature::UprobeSession)] = {Presence::Missing, "attach uprobe session: Invalid argument"};
  EXPECT_EQ(choose_probe_mode(k, ProbeMode::Auto).value(), ProbeMode::Classic);
  auto refused = choose_probe_mode(k, ProbeMode::Session);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("uprobe sessions (Linux 6.13)"), std::string::npos)
      << refused.error();
  // A session's frees go through a uprobe_multi link: without one, no sessions.
  k = all_present();
  k.states[size_t(Feature::UprobeMulti)] = {Presence::Missing, "forced by --force-fallback"};
  EXPECT_EQ(choose_probe_mode(k, ProbeMode::Auto).value(), ProbeMode::Classic);
  EXPECT_NE(choose_probe_mode(k, ProbeMode::Session).error().message.find("uprobe_multi"), std::string::npos);
}

// What a recording says of its paths: the fallback and why, nothing more
// where the kernel has everything.
TEST(KernelPaths, NameEachFallbackAndWhy) {
  KernelFeatures k = all_present();
  auto paths = kernel_paths(k, ProbeMode::Session, ProbeMode::Auto, true);
  EXPECT_EQ(paths,
            (std::vector<std::pair<std::string, std::string>>{{"kernel", "6.18.1-test"},
                                                              {"probes", "uprobe sessions"},
                                                              {"unwind", "dwarf tables in the kernel"}}));
  for (Feature f : {Feature::UprobeMulti, Feature::UprobeSession, Feature::NopEmulation})
    k.states[size_t(f)] = {Presence::Missing, "attach: Invalid argument"};
  paths = kernel_paths(k, ProbeMode::Classic, ProbeMode::Auto, false);
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[1].second, "classic uprobes and uretprobes (no uprobe sessions before Linux 6.13)");
  EXPECT_EQ(paths[2].second, "frame pointers");
  EXPECT_EQ(paths[3].first, "placement");
  // Asked for classic: no fallback to explain.
  EXPECT_EQ(kernel_paths(k, ProbeMode::Classic, ProbeMode::Classic, true)[1].second,
            "classic uprobes and uretprobes");
  force_fallbacks(k, "uprobe_session");
  EXPECT_EQ(kernel_paths(k, ProbeMode::Classic, ProbeMode::Auto, true)[1].second,
            "classic uprobes and uretprobes (uprobe sessions forced off)");
}

TEST(KernelFeatures, EmulationFollowsWhatTheKernelEmulates) {
  KernelFeatures k = all_present();
  EXPECT_TRUE(emulation_of(k).nops);
  k.states[size_t(Feature::NopEmulation)] = {Presence::Missing, "a probe on a 4-byte nop single-stepped"};
  EXPECT_FALSE(emulation_of(k).nops);
  EXPECT_TRUE(emulation_of(k).push);
}

}  // namespace
}  // namespace allocscope
