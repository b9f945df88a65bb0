// The JVM's and V8's rooms while their heaps are not read: a process whose
// samples hold frames of the runtime's file is named once in one note, and
// nothing is said of processes without.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runtime/jvm/jvm_runtime.h"
#include "runtime/v8/v8_runtime.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

Mapping file(const std::string& path) {
  Mapping m;
  m.start = 0x1000, m.end = 0x2000, m.inode = 7, m.executable = true, m.path = path;
  return m;
}

void sample(Runtime& r, pid_t pid, std::vector<Mapping> maps) {
  std::vector<uint64_t> ips{0x1100};
  r.place_frames(pid, maps, {}, 0, ips);
  EXPECT_EQ(ips, std::vector<uint64_t>{0x1100}) << "its frames are left as they were";
}

TEST(UnreadHeaps, NamesFiles) {
  EXPECT_TRUE(is_jvm_library_name("libjvm.so"));
  EXPECT_FALSE(is_jvm_library_name("libjvm.so.bak"));
  EXPECT_FALSE(is_jvm_library_name("libjava.so"));
  for (const char* v8 : {"node", "nodejs", "deno", "electron", "libnode.so.115", "libnode.so"})
    EXPECT_TRUE(is_v8_file_name(v8)) << v8;
  for (const char* other : {"nodemon", "libc.so.6", "python3.13", "anode"})
    EXPECT_FALSE(is_v8_file_name(other));
}

TEST(UnreadHeaps, AJvmIsNamedOnceAndOthersNotAtAll) {
  Symbolizer symbolizer;
  auto jvm = make_jvm_runtime(RuntimeServices{symbolizer});
  std::vector<uint64_t> none(AS_CNT_COUNT, 0);
  sample(*jvm, 100, {file("/usr/lib/x86_64-linux-gnu/libc.so.6")});
  EXPECT_TRUE(jvm->warnings(none).empty()) << "a C program's samples";
  const std::string libjvm = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
  for (int i = 0; i < 3; ++i)
    sample(*jvm, getpid(), {file("/usr/lib/x86_64-linux-gnu/libc.so.6"), file(libjvm)});
  sample(*jvm, 100, {file(libjvm)});  // its first stack held no frame of HotSpot's
  auto lines = jvm->warnings(none);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("note: jvm: the Java heap of 2 process(es) ("), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" 100, "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" " + std::to_string(getpid()) + ")"), std::string::npos) << lines[0];
  std::vector<std::pair<std::string, uint64_t>> counters;
  jvm->add_counters(none, counters);
  EXPECT_EQ(counters, (std::vector<std::pair<std::string, uint64_t>>{{"jvm_heap_unread_processes", 2}}));
}

// A JVM allocscope entered (or launched) whose agent had not reported by
// the end: too short a recording, not a JVM out of reach.
TEST(UnreadHeaps, AnEnteredJvmWhoseAgentSaidNothingAsksForALongerRecording) {
  Symbolizer symbolizer;
  for (bool system_wide : {false, true}) {
    RuntimeSettings settings;
    settings.rate = 512 * 1024;
    settings.system_wide = system_wide;
    settings.writes_processes = !system_wide;
    auto jvm = make_jvm_runtime(RuntimeServices{symbolizer, nullptr, settings});
    sample(*jvm, 400, {file("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so")});
    auto lines = jvm->warnings(std::vector<uint64_t>(AS_CNT_COUNT, 0));
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find(" 400) is not read: allocscope's JVMTI agent reported nothing from it before the "
                            "recording ended"),
              std::string::npos)
        << lines[0];
  }
}

TEST(UnreadHeaps, AJvmWhoseAgentSamplesIsReadAndOneThatCannotSaysWhy) {
  Symbolizer symbolizer;
  auto jvm = make_jvm_runtime(RuntimeServices{symbolizer});
  std::vector<uint64_t> none(AS_CNT_COUNT, 0);
  const Mapping libjvm = file("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
  sample(*jvm, 300, {libjvm});  // its HotSpot frames came before its agent's first sample
  std::vector<uint64_t> ips;
  jvm->place_agent_frames(300, "python", {}, ips);  // another runtime's agent: not the JVM's
  auto lines = jvm->warnings(none);
  ASSERT_EQ(lines.size(), 1u) << "still unread";
  jvm->place_agent_frames(300, "jvm", {}, ips);
  sample(*jvm, 300, {libjvm});
  EXPECT_TRUE(jvm->warnings(none).empty()) << "its Java heap is read";
  jvm->on_agent_note(301, "jvm", "another JVMTI agent (a profiler?) samples its heap");
  sample(*jvm, 302, {libjvm});
  lines = jvm->warnings(none);
  ASSERT_EQ(lines.size(), 2u) << "a note per reason";
  EXPECT_NE(lines[0].find(" 302) is not read: allocscope's JVMTI agent is not in it"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find(
                " 301) is not read: another JVMTI agent (a profiler?) samples its heap; its Java objects"),
            std::string::npos)
      << lines[1];
  std::vector<std::pair<std::string, uint64_t>> counters;
  jvm->add_counters(none, counters);
  EXPECT_EQ(counters,
            (std::vector<std::pair<std::string, uint64_t>>{
                {"jvm_heap_unread_processes", 2}, {"jvm_heap_read_processes", 1}, {"java_samples", 1}}));
  ASSERT_EQ(jvm->paths().size(), 1u);
  EXPECT_EQ(jvm->paths()[0].key, "java");
}

TEST(UnreadHeaps, AJvmLeftUnsampledOrRecordedExactlySaysSo) {
  Symbolizer symbolizer;
  std::vector<uint64_t> none(AS_CNT_COUNT, 0);
  const Mapping libjvm = file("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so");
  RuntimeSettings left_off, exactly;
  left_off.rate = 4096;
  left_off.off = {"jvm"};
  exactly.rate = 1;
  auto off = make_jvm_runtime(RuntimeServices{symbolizer, nullptr, left_off});
  auto exact = make_jvm_runtime(RuntimeServices{symbolizer, nullptr, exactly});
  sample(*off, 400, {libjvm});
  sample(*exact, 400, {libjvm});
  ASSERT_EQ(off->warnings(none).size(), 1u);
  EXPECT_NE(off->warnings(none)[0].find("is not read: left unsampled (--no-java-heap); its Java objects"),
            std::string::npos)
      << off->warnings(none)[0];
  ASSERT_EQ(exact->warnings(none).size(), 1u);
  EXPECT_NE(exact->warnings(none)[0].find("is not read: exact mode (--rate 1)"), std::string::npos)
      << exact->warnings(none)[0];
}

TEST(UnreadHeaps, ANodeIsNamedByItsProgramOrItsLibrary) {
  Symbolizer symbolizer;
  auto v8 = make_v8_runtime(RuntimeServices{symbolizer});
  std::vector<uint64_t> none(AS_CNT_COUNT, 0);
  sample(*v8, 200, {file("/usr/bin/node")});
  sample(*v8, 201, {file("/usr/lib/x86_64-linux-gnu/libnode.so.115")});
  sample(*v8, 202, {file("/usr/bin/python3")});
  auto lines = v8->warnings(none);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("note: v8: V8's garbage-collected heap of 2 process(es)"), std::string::npos)
      << lines[0];
}

}  // namespace
}  // namespace allocscope
