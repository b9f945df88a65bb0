// The JVM's agent's records (java_record.h) as the sink takes them: a
// sampled Java object becomes a stack whose frames the agent named, then its
// sample; the JVM room puts those frames in place as runtime frames, each
// with its file and line.
#include "record/events/agent_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "abi/preload/entry_codes.h"
#include "abi/preload/java_record.h"
#include "abi/preload/trial_record.h"
#include "runtime/jvm/jvm_runtime.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

struct Frame {
  std::string function, file;
  int32_t line;
};

std::vector<uint8_t> encode(const std::vector<Frame>& frames) {
  std::vector<uint8_t> out;
  for (const Frame& f : frames) {
    size_t at = out.size();
    out.resize(at + as_java_frame_bytes(f.function.size(), f.file.size()));
    uint8_t* end = as_java_put_frame(out.data() + at, f.line, f.function.data(), f.function.size(),
                                     f.file.data(), f.file.size());
    EXPECT_EQ(end, out.data() + out.size());
  }
  return out;
}

std::vector<uint8_t> java_record(uint64_t rate, uint64_t addr, const std::vector<Frame>& frames) {
  std::vector<uint8_t> names = encode(frames);
  as_java_alloc a{};
  a.kind = AS_TRIAL_JAVA_ALLOC;
  a.tid = 7;
  a.addr = addr;
  a.ts_ns = 1000;
  a.size = 10256;
  a.rate = rate;
  a.frames = uint32_t(frames.size());
  a.bytes = uint32_t(names.size());
  std::vector<uint8_t> out(sizeof a);
  std::memcpy(out.data(), &a, sizeof a);
  out.insert(out.end(), names.begin(), names.end());
  return out;
}

const std::vector<Frame> kFrames = {{"Alloc.site_bytes", "Alloc.java", 21},
                                    {"Alloc.outer", "Alloc.java", 42},
                                    {"Alloc.main", "Alloc.java", 50}};

TEST(AgentRecords, AJavaSampleIsANamedStackThenItsSample) {
  AgentRecords records(512 * 1024);
  std::vector<Event> out;
  auto emit = [&](Event e) { out.push_back(std::move(e)); };
  ASSERT_TRUE(records.translate(99, "java", java_record(512 * 1024, AS_JAVA_TAG_BIT | 5, kFrames), emit));
  ASSERT_EQ(out.size(), 2u);
  const auto& s = std::get<StackEvent>(out[0]);
  const auto& a = std::get<AllocEvent>(out[1]);
  EXPECT_EQ(s.agent, "jvm");
  EXPECT_EQ(s.fn, AS_CODE_JAVA_NEW);
  EXPECT_EQ(s.stop, AS_STOP_COMPLETE);
  EXPECT_TRUE(s.ips.empty()) << "no native frame: the agent's are all";
  EXPECT_EQ(s.runtime_part, encode(kFrames));
  EXPECT_EQ(a.stack, s.id);
  EXPECT_EQ(a.addr, AS_JAVA_TAG_BIT | 5);
  EXPECT_EQ(a.size, 10256u);
  EXPECT_EQ(a.tid, 7u);
  EXPECT_EQ(a.ts_ns, 1000u);
  EXPECT_EQ(a.flags, AS_EVF_NO_OFFSET | AS_EVF_FREE_IN_RING) << "its free comes through the ring";
  EXPECT_EQ(records.java_samples(), 1u);

  uint64_t first = s.id;
  out.clear();
  ASSERT_TRUE(records.translate(99, "java", java_record(512 * 1024, 0, kFrames), emit));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(std::get<StackEvent>(out[0]).id, first) << "each sample its own stack";
  EXPECT_TRUE(std::get<AllocEvent>(out[1]).flags & AS_EVF_UNTRACKED) << "an object the agent could not tag";
}

TEST(AgentRecords, OtherRatesShortRecordsAndNotesAreCountedOrSaid) {
  AgentRecords records(512 * 1024);
  std::vector<Event> out;
  auto emit = [&](Event e) { out.push_back(std::move(e)); };
  EXPECT_TRUE(records.translate(1, "java", java_record(4096, 8, kFrames), emit));
  EXPECT_EQ(records.other_rate(), 1u);
  std::vector<uint8_t> cut = java_record(512 * 1024, 8, kFrames);
  cut.resize(cut.size() - 1);
  EXPECT_TRUE(records.translate(1, "java", cut, emit));
  EXPECT_EQ(records.malformed(), 1u);
  EXPECT_TRUE(out.empty());

  std::string why = "another JVMTI agent samples its heap";
  as_java_note n{};
  n.kind = AS_TRIAL_JAVA_NOTE;
  n.len = uint32_t(why.size());
  std::vector<uint8_t> note(sizeof n);
  std::memcpy(note.data(), &n, sizeof n);
  note.insert(note.end(), why.begin(), why.end());
  EXPECT_TRUE(records.translate(3, "java", note, emit));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::get<AgentNote>(out[0]).text, why);
  EXPECT_EQ(std::get<AgentNote>(out[0]).tgid, 3u);

  as_trial_free f{};
  f.kind = AS_TRIAL_FREE;
  std::vector<uint8_t> free_record(sizeof f);
  std::memcpy(free_record.data(), &f, sizeof f);
  EXPECT_FALSE(records.translate(3, "java", free_record, emit)) << "not an agent's: the caller's";
}

TEST(AgentRecords, TheJvmRoomNamesEachFrameWithItsFileAndLine) {
  Symbolizer symbolizer;
  std::vector<uint64_t> ips;
  ASSERT_TRUE(place_java_frames(symbolizer, encode(kFrames), ips));
  ASSERT_EQ(ips.size(), kFrames.size());
  for (size_t i = 0; i < ips.size(); ++i) {
    FrameInfo f = symbolizer.describe(Symbolizer::kNoMapping, ips[i]);
    EXPECT_EQ(f.runtime, "java");
    EXPECT_EQ(f.function, kFrames[i].function);
    ASSERT_FALSE(f.frames.empty());
    EXPECT_EQ(f.frames.back().file, kFrames[i].file);
    EXPECT_EQ(f.frames.back().line, kFrames[i].line);
  }
  std::vector<uint8_t> cut = encode(kFrames);
  cut.resize(cut.size() - 3);
  std::vector<uint64_t> some;
  EXPECT_FALSE(place_java_frames(symbolizer, cut, some));
  EXPECT_EQ(some.size(), 2u) << "the whole frames before the cut are kept";
}

}  // namespace
}  // namespace allocscope
