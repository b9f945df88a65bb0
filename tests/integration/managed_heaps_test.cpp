// Runtimes whose garbage-collected heap allocscope does not read yet (the
// JVM's, V8's): a recording of one says so in one line, and the program
// runs as it would untraced.
#include <gtest/gtest.h>

#include <string>

#include "../unit/temp_dir.h"
#include "harness.h"

namespace allocscope::test {
namespace {

TEST(ManagedHeaps, AJvmIsSaidToHaveItsJavaHeapUnread) {
  REQUIRE_BPF();
  TempDir dir;
  std::string out = dir.path.string() + "/java.folded";
  RunResult r = run(
      {ALLOCSCOPE_BIN, "record", "-o", out, "--", "java", "-cp", JAVA_CLASSES_DIR, "Alloc", "200", "10240"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(" kept 50\n"), std::string::npos) << "the program's own output: " << r.out;
  EXPECT_NE(r.err.find("note: jvm: the Java heap of 1 process(es) (java "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is not read: its Java objects are not in the profile"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("note: v8:"), std::string::npos) << r.err;
}

TEST(ManagedHeaps, ANodeIsSaidToHaveItsJavaScriptHeapUnread) {
  REQUIRE_BPF();
  TempDir dir;
  std::string out = dir.path.string() + "/node.folded";
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", "node", "-e",
                     "const a = []; for (let i = 0; i < 200000; i++) a.push({i, s: 'x' + i});"
                     "console.log('made ' + a.length)"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "made 200000\n");
  EXPECT_NE(r.err.find("note: v8: V8's garbage-collected heap of 1 process(es) (node "), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("note: jvm:"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace allocscope::test
