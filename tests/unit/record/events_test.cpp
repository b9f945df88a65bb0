// The edge of the event path: the kernel's ring buffer records decoded
// into the typed events the sink takes (record/events/events.h), as the
// BPF programs send them (a stack sent alone ends with its last Python
// frame; a walk the kernel could not finish follows its stack).
#include "record/events/events.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace allocscope {
namespace {

template <typename T>
std::vector<uint8_t> bytes_of(const T& v, size_t size = sizeof(T)) {
  std::vector<uint8_t> out(size);
  std::memcpy(out.data(), &v, std::min(size, sizeof v));
  return out;
}

as_stack_event stack_record() {
  as_stack_event s{};
  s.kind = AS_EV_STACK;
  s.tgid = 40;
  s.ns_tgid = 4;
  s.fn = AS_FN_CALLOC;
  s.stop = AS_STOP_COMPLETE;
  s.id = 99;
  s.start_ns = 7;
  s.exec_id = 2;
  std::memcpy(s.comm, "worker", 7);
  s.nvmas = 1;
  s.vmas[0].start = 0x1000;
  s.vmas[0].end = 0x5000;
  s.vmas[0].pgoff = 0x2000;
  s.vmas[0].ino = 12;
  s.vmas[0].dev = (8u << 20) | 1;
  s.nframes = 2;
  s.frames[0] = 0x1234;
  s.frames[1] = 0x2345;
  return s;
}

TEST(KernelEvents, AStackSentAloneIsDecodedWithItsMappingsAndRuntimePart) {
  as_stack_event s = stack_record();
  s.npy = 1;
  s.py[0].code = 0xc0de;
  size_t alone = offsetof(as_stack_event, py) + sizeof(as_py_frame);  // ends with its last Python frame
  auto event = decode_kernel_event(bytes_of(s, alone));
  ASSERT_TRUE(event.has_value());
  const auto* e = std::get_if<StackEvent>(&*event);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->tgid, 40u);
  EXPECT_EQ(e->ns_tgid, 4u);
  EXPECT_EQ(e->fn, AS_FN_CALLOC);
  EXPECT_EQ(e->id, 99u);
  EXPECT_EQ(e->comm, "worker");
  EXPECT_EQ(e->ips, (std::vector<uint64_t>{0x1234, 0x2345}));
  ASSERT_EQ(e->mappings.size(), 1u);
  EXPECT_EQ(e->mappings[0].start, 0x1000u);
  EXPECT_EQ(e->mappings[0].offset, 0x2000u);
  EXPECT_EQ(e->mappings[0].dev_major, 8u);
  EXPECT_EQ(e->mappings[0].dev_minor, 1u);
  EXPECT_EQ(e->mappings[0].inode, 12u);
  EXPECT_FALSE(e->walk.has_value());
  // The runtime part begins at npy: the Python room reads its frame there.
  ASSERT_EQ(e->runtime_part.size(), alone - offsetof(as_stack_event, npy));
  uint32_t npy = 0;
  std::memcpy(&npy, e->runtime_part.data(), sizeof npy);
  EXPECT_EQ(npy, 1u);
}

TEST(KernelEvents, AWalkToFinishFollowsItsStack) {
  as_stack_event s = stack_record();
  s.stop = AS_STOP_NO_TABLE;
  as_deferred_walk w{};
  w.ip = 0x1234;
  w.len = 16;
  std::vector<uint8_t> data = bytes_of(s);
  std::vector<uint8_t> walk = bytes_of(w);
  data.insert(data.end(), walk.begin(), walk.end());
  data.insert(data.end(), 24, 0xab);  // more stack than the walk says: only len bytes kept
  auto event = decode_kernel_event(data);
  ASSERT_TRUE(event.has_value());
  const auto& e = std::get<StackEvent>(*event);
  ASSERT_TRUE(e.walk.has_value());
  EXPECT_EQ(e.walk->ip, 0x1234u);
  EXPECT_EQ(e.walk_stack, std::vector<uint8_t>(16, 0xab));
  EXPECT_EQ(e.runtime_part.size(), sizeof(as_stack_event) - offsetof(as_stack_event, npy));
}

TEST(KernelEvents, EachKindIsDecodedAndShortRecordsAreNot) {
  as_alloc_event a{};
  a.hdr.kind = AS_EV_ALLOC;
  a.hdr.tgid = 5;
  a.hdr.tid = 6;
  a.hdr.fn = AS_FN_MALLOC;
  a.hdr.flags = AS_EVF_UNTRACKED;
  a.hdr.ts_ns = 100;
  a.hdr.addr = 0x10;
  a.hdr.size = 48;
  a.hdr.stack = 99;
  std::memcpy(a.comm, "app", 4);
  auto alloc = decode_kernel_event(bytes_of(a));
  ASSERT_TRUE(alloc.has_value());
  const auto& got = std::get<AllocEvent>(*alloc);
  EXPECT_EQ(got.tid, 6u);
  EXPECT_EQ(got.flags, AS_EVF_UNTRACKED);
  EXPECT_EQ(got.stack, 99u);
  EXPECT_EQ(got.comm, "app");
  EXPECT_EQ(event_time(*alloc), 100u);
  EXPECT_EQ(event_process(*alloc), 5u);

  as_event f = a.hdr;  // a free is the header alone
  f.kind = AS_EV_FREE;
  auto free = decode_kernel_event(bytes_of(f));
  ASSERT_TRUE(free.has_value());
  EXPECT_EQ(std::get<FreeEvent>(*free).addr, 0x10u);

  as_proc_event p{};
  p.kind = AS_EV_EXITING;
  p.tgid = 5;
  p.held = 1;
  p.ts_ns = 300;
  auto exiting = decode_kernel_event(bytes_of(p));
  ASSERT_TRUE(exiting.has_value());
  EXPECT_EQ(std::get<ProcessEvent>(*exiting).e.held, 1u);
  EXPECT_EQ(event_time(*exiting), 300u);

  as_cgroup_event c{};
  c.kind = AS_EV_CGROUP;
  c.id = 77;
  c.len = 4;
  std::memcpy(c.path, "/a/bXXX", 7);
  auto made = decode_kernel_event(bytes_of(c));
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(std::get<CgroupEvent>(*made).path, "/a/b");
  EXPECT_FALSE(event_time(*made).has_value());
  c.kind = AS_EV_CGROUP_GONE;
  EXPECT_TRUE(std::get<CgroupEvent>(*decode_kernel_event(bytes_of(c))).gone);

  as_table_event t{};
  t.kind = AS_EV_NEED_TABLE;
  t.tgid = 9;
  t.vma.ino = 3;
  auto need = decode_kernel_event(bytes_of(t));
  ASSERT_TRUE(need.has_value());
  EXPECT_EQ(std::get<TableNeeded>(*need).vma.ino, 3u);

  EXPECT_FALSE(decode_kernel_event(bytes_of(a, sizeof a - 1)).has_value());
  EXPECT_FALSE(decode_kernel_event(bytes_of(stack_record(), offsetof(as_stack_event, py) - 1)).has_value());
  EXPECT_FALSE(decode_kernel_event(std::vector<uint8_t>(3)).has_value());
  uint32_t unknown = 1000;
  EXPECT_FALSE(decode_kernel_event(bytes_of(unknown, 64)).has_value());
}

}  // namespace
}  // namespace allocscope
