// Privileges, lockdown and limits, parsed from the kernel's text.
#include "host/privileges.h"

#include <gtest/gtest.h>

namespace allocscope {
namespace {

TEST(Privileges, TheInitialUserNamespaceMapsEveryIdToItself) {
  EXPECT_TRUE(is_initial_uid_map("         0          0 4294967295\n"));
  EXPECT_FALSE(is_initial_uid_map("         0      54321          1\n")) << "unshare --map-root-user";
  EXPECT_FALSE(is_initial_uid_map("         0     100000      65536\n")) << "a rootless container";
  EXPECT_FALSE(is_initial_uid_map("0 0 1000\n1000 1000 4294966295\n"));
  EXPECT_FALSE(is_initial_uid_map(""));
}

TEST(Privileges, RootWithEveryCapability) {
  Privileges p = parse_privileges(
      "Name:\tallocscope\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\n"
      "CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n");
  ASSERT_TRUE(p.euid);
  EXPECT_EQ(*p.euid, 0u);
  for (int cap : {kCapBpf, kCapPerfmon, kCapSysAdmin, kCapSysPtrace}) EXPECT_TRUE(p.has(cap)) << cap;
}

// A user given CAP_BPF and CAP_PERFMON alone (setcap cap_bpf,cap_perfmon+ep).
TEST(Privileges, UserWithBpfAndPerfmonOnly) {
  Privileges p = parse_privileges("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t000000c000000000\n");
  EXPECT_EQ(p.euid.value(), 1000u);
  EXPECT_TRUE(p.has(kCapBpf));
  EXPECT_TRUE(p.has(kCapPerfmon));
  EXPECT_FALSE(p.has(kCapSysAdmin));
  EXPECT_FALSE(p.has(kCapSysPtrace));
}

TEST(Privileges, EffectiveUidIsTheSecondField) {
  EXPECT_EQ(parse_privileges("Uid:\t1000\t0\t0\t0\n").euid.value(), 0u);
}

TEST(Privileges, MissingLinesAreUnknownNotNone) {
  Privileges p = parse_privileges("Name:\tx\n");
  EXPECT_FALSE(p.euid);
  EXPECT_FALSE(p.capabilities);
  EXPECT_FALSE(p.has(kCapBpf));
}

TEST(Lockdown, TheBracketedModeIsTheOneInForce) {
  EXPECT_EQ(parse_lockdown("none [integrity] confidentiality\n").value(), "integrity");
  EXPECT_EQ(parse_lockdown("[none] integrity confidentiality\n").value(), "none");
  EXPECT_FALSE(parse_lockdown(""));
}

}  // namespace
}  // namespace allocscope
