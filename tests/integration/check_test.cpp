// allocscope check on this machine: what it says of the kernel it runs on,
// with a fallback forced, and without privileges. (The kernel matrix checks
// its findings against each Debian kernel's known features.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "harness.h"

namespace allocscope::test {
namespace {

nlohmann::json check_json(const std::vector<std::string>& options = {}) {
  std::vector<std::string> argv{ALLOCSCOPE_BIN, "check", "--json"};
  argv.insert(argv.end(), options.begin(), options.end());
  RunResult r = run(argv);
  EXPECT_EQ(r.err, "");
  return nlohmann::json::parse(r.out);
}

// Where the integration tests run, allocscope records: every required
// feature is present, every program loads, and the text says so.
TEST(Check, ThisMachineCanRecord) {
  REQUIRE_BPF();
  RunResult text = run({ALLOCSCOPE_BIN, "check"});
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("record: yes"), std::string::npos) << text.out;
  nlohmann::json doc = check_json();
  EXPECT_EQ(doc["record"], true);
  for (const auto& [key, f] : doc["features"].items()) {
    if (f["required"] == true) {
      EXPECT_EQ(f["present"], true) << key;
    }
  }
  ASSERT_GE(doc["trials"].size(), 4u);
  for (const auto& t : doc["trials"]) EXPECT_EQ(t["ok"], true) << t["what"] << ": " << t["error"];
}

// A forced fallback reads as missing, with the reason, and the probe mode
// follows it.
TEST(Check, ForcedFallbackIsReportedMissing) {
  REQUIRE_BPF();
  nlohmann::json doc = check_json({"--force-fallback", "uprobe_session,nop_emulation"});
  EXPECT_EQ(doc["features"]["uprobe_session"]["present"], false);
  EXPECT_NE(doc["features"]["uprobe_session"]["detail"].get<std::string>().find("forced"), std::string::npos);
  EXPECT_EQ(doc["features"]["nop_emulation"]["present"], false);
  EXPECT_EQ(doc["probe_mode"], "classic");
  EXPECT_EQ(doc["record"], true);
}

// A feature that cannot be forced (unknown, or required) is refused as a
// bad option value, naming those that can; nothing is probed or recorded.
TEST(Check, AFallbackThatCannotBeForcedIsRefused) {
  RunResult check = run({ALLOCSCOPE_BIN, "check", "--force-fallback", "uprobe_session,btf"});
  RunResult record =
      run({ALLOCSCOPE_BIN, "record", "--force-fallback", "uprobe_session,btf", "--", "/bin/true"});
  for (const RunResult* r : {&check, &record}) {
    EXPECT_EQ(r->status, 2) << r->err;
    EXPECT_NE(r->err.find("'btf' is not an optional kernel feature"), std::string::npos) << r->err;
    EXPECT_NE(r->err.find("uprobe_session"), std::string::npos) << r->err;
  }
}

// Without privileges nothing is probed or claimed, and the exit status says no.
TEST(Check, WithoutPrivilegesSaysWhatToGrant) {
  REQUIRE_BPF();  // needs root to drop to another user
  RunResult r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     "--inh-caps=-all", ALLOCSCOPE_BIN, "check"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("kernel features: not probed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CAP_BPF and CAP_PERFMON"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("yes  "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace allocscope::test
