// What the event sink's tests share: records as the BPF program writes
// them, and a sink over a profile with every hook faked (no kernel, no /proc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "fake_sink_hooks.h"
#include "record/events/event_sink.h"

namespace allocscope {

template <typename T>
std::span<const uint8_t> bytes(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

inline as_stack_event stack_event(uint64_t id, uint32_t tgid, std::vector<uint64_t> frames, uint16_t stop) {
  as_stack_event e{};
  e.kind = AS_EV_STACK;
  e.tgid = tgid;
  e.fn = AS_FN_MALLOC;
  e.stop = stop;
  e.nframes = uint32_t(frames.size());
  e.id = id;
  std::strcpy(e.comm, "worker");
  std::copy(frames.begin(), frames.end(), e.frames);
  return e;
}

inline as_alloc_event alloc_event(uint64_t stack, uint32_t tgid, uint64_t addr, uint64_t size) {
  as_alloc_event a{};
  a.hdr.kind = AS_EV_ALLOC;
  a.hdr.tgid = tgid;
  a.hdr.fn = AS_FN_MALLOC;
  a.hdr.addr = addr;
  a.hdr.size = size;
  a.hdr.stack = stack;
  std::strcpy(a.comm, "worker");
  return a;
}

inline as_proc_event process_event(as_event_kind kind, uint32_t tgid) {
  as_proc_event e{};
  e.kind = kind;
  e.tgid = tgid;
  std::strcpy(e.comm, "worker");
  return e;
}

struct FakeUnwind : UnwindTables {
  void need_table(uint32_t, const as_vma&) override {}
  void on_exec(uint32_t tgid, uint32_t dev, uint64_t ino) override { execs.push_back({tgid, dev, ino}); }
  void prepare_process(uint32_t tgid, std::function<void()> then) override {
    prepared.push_back(tgid);
    continuations.push_back(std::move(then));
  }
  std::vector<uint32_t> prepared;
  std::vector<std::function<void()>> continuations;  // tables "built": run by the test
  std::vector<std::tuple<uint32_t, uint32_t, uint64_t>> execs;
  // Every walk completes (two frames more), unless `building`: then it
  // waits if it may, and is cut where the table is missing if not.
  bool building = false;
  int walks = 0;
  std::vector<uint32_t> waited_at_exec;
  bool tables_built() const override { return false; }
  void collect_tables() override {}
  void wait_for_walks(uint32_t tgid, uint64_t) override { waited_at_exec.push_back(tgid); }
  int finish_walk(uint32_t, const as_deferred_walk&, std::span<const uint8_t>, std::vector<uint64_t>& ips,
                  bool may_wait) override {
    ++walks;
    if (building) return may_wait ? kWalkWaits : AS_STOP_NO_TABLE;
    ips.push_back(0x7000);
    ips.push_back(0x8000);
    return AS_STOP_COMPLETE;
  }
};

struct Fixture {
  Profile profile{1 << 16, 100, 100};
  Symbolizer symbolizer;
  FakeVerdicts verdicts;
  FakeKernel kernel;
  FakeLibraries libraries;
  FakeUnwind unwind;
  EventSink sink{profile, symbolizer, {verdicts, kernel, libraries, unwind}, 100};
  // A pid no process has: the sink must not need /proc for anything here.
  uint32_t tgid = 0x7ffffff0;
};

}  // namespace allocscope
