// The shared ring the preload library writes and allocscope reads without
// BPF: records come out whole and in order across the ring's end, a full
// ring or a taken lock counts its records lost and never waits, writers in
// several threads and in a forked process lose nothing but what they count,
// and a dead writer's busy record is passed.
#include "abi/preload/shared_ring.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "memory_ring.h"

namespace {

bool put(as_ring_header* h, uint32_t tgid, const std::vector<uint8_t>& payload) {
  void* p = as_ring_reserve(h, uint32_t(payload.size()), tgid);
  if (!p) return false;
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());  // data() of empty may be null
  as_ring_commit(p);
  return true;
}

struct Record {
  uint32_t tgid;
  std::vector<uint8_t> payload;
};

std::vector<Record> drain(as_ring_header* h) {
  std::vector<Record> out;
  uint32_t len = 0, tgid = 0, busy = 0;
  while (const void* p = as_ring_peek(h, &len, &tgid, &busy)) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.push_back({tgid, std::vector<uint8_t>(b, b + len)});
    as_ring_release(h);
  }
  return out;
}

std::vector<uint8_t> bytes_of(uint32_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i);
  return v;
}

TEST(SharedRing, RecordsComeOutWholeAndInOrderAcrossTheEnd) {
  MemoryRing r(4096);
  std::vector<Record> want;
  for (int round = 0; round < 50; ++round) {  // 50 rounds of ~1.3 KiB: the end is crossed many times
    for (uint32_t n : {0u, 1u, 13u, 300u, 1000u}) {
      want.push_back({uint32_t(round + 1), bytes_of(n, uint8_t(round + n))});
      ASSERT_TRUE(put(r.h, uint32_t(round + 1), want.back().payload)) << round << " " << n;
    }
    std::vector<Record> got = drain(r.h);
    ASSERT_EQ(got.size(), 5u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tgid, want[want.size() - 5 + i].tgid);
      EXPECT_EQ(got[i].payload, want[want.size() - 5 + i].payload);
    }
  }
  EXPECT_EQ(r.h->lost, 0u);
}

TEST(SharedRing, AFullRingCountsItsRecordsLostAndFreesOnRead) {
  MemoryRing r(4096);
  int placed = 0;
  while (put(r.h, 1, bytes_of(500, 1))) ++placed;
  EXPECT_EQ(placed, 4096 / 512);  // 8 + 504 bytes each
  EXPECT_EQ(r.h->lost, 1u);
  EXPECT_EQ(r.h->lost_bytes, 500u);
  EXPECT_FALSE(put(r.h, 1, bytes_of(3000, 1)));  // over half the ring: never placed
  EXPECT_EQ(drain(r.h).size(), size_t(placed));
  EXPECT_TRUE(put(r.h, 1, bytes_of(500, 1)));
}

// A full ring: the writer waits for room while the reader reads, and
// loses the record at once when the reader has stopped beating.
TEST(SharedRing, AWriterWaitsForRoomOnlyWhileTheReaderReads) {
  MemoryRing r(4096);
  as_ring_beat(r.h);
  int why = 0;
  while (void* p = as_ring_try_reserve(r.h, 500, 1, &why)) as_ring_commit(p);
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    drain(r.h);
  });
  EXPECT_TRUE(put(r.h, 1, bytes_of(500, 1))) << "placed once the reader made room";
  reader.join();
  EXPECT_EQ(r.h->lost, 0u);
  while (void* p = as_ring_try_reserve(r.h, 500, 1, &why)) as_ring_commit(p);
  r.h->reader_beat_ns -= AS_RING_READER_STALE_NS + 1;  // a reader gone silent
  EXPECT_FALSE(put(r.h, 1, bytes_of(500, 1)));
  EXPECT_EQ(r.h->lost, 1u);
}

// The traced processes write the ring: a length that would take the
// reader past its end makes the ring unreadable, never read out of bounds.
TEST(SharedRing, ARecordThatLeavesTheRingIsCorrupt) {
  MemoryRing r(4096);
  ASSERT_TRUE(put(r.h, 1, bytes_of(16, 1)));
  auto* rec = reinterpret_cast<as_ring_record*>(as_ring_data(r.h));
  rec->len_flags = 5000;  // longer than the ring
  uint32_t len = 0, tgid = 0, busy = 0;
  EXPECT_EQ(as_ring_peek(r.h, &len, &tgid, &busy), nullptr);
  EXPECT_EQ(busy, AS_RING_CORRUPT);
  rec->len_flags = 100 | AS_RING_PADDING;  // a padding that does not end at the ring's end
  EXPECT_EQ(as_ring_peek(r.h, &len, &tgid, &busy), nullptr);
  EXPECT_EQ(busy, AS_RING_CORRUPT);
  rec->len_flags = 16;
  EXPECT_NE(as_ring_peek(r.h, &len, &tgid, &busy), nullptr);
  EXPECT_EQ(len, 16u);
}

TEST(SharedRing, AWriterWaitsForTheLockOnlyBriefly) {
  MemoryRing r(4096);
  r.h->lock = 99;  // a writer that died placing its record
  EXPECT_FALSE(put(r.h, 1, bytes_of(8, 1)));
  EXPECT_EQ(r.h->lost, 1u);
  EXPECT_EQ(as_ring_lock_holder(r.h), 99u);
  as_ring_break_dead_lock(r.h, 98);  // not the holder: nothing broken
  EXPECT_EQ(as_ring_lock_holder(r.h), 99u);
  as_ring_break_dead_lock(r.h, 99);
  EXPECT_EQ(as_ring_lock_holder(r.h), 0u);
  EXPECT_TRUE(put(r.h, 1, bytes_of(8, 1)));
  EXPECT_EQ(as_ring_lock_holder(r.h), 0u) << "released after the reservation";
}

TEST(SharedRing, ABusyRecordStopsTheReaderUntilItsWriterIsKnownGone) {
  MemoryRing r(4096);
  void* held = as_ring_reserve(r.h, 16, 42);  // its writer died before committing
  ASSERT_NE(held, nullptr);
  ASSERT_TRUE(put(r.h, 7, bytes_of(16, 3)));
  uint32_t len = 0, tgid = 0, busy = 0;
  EXPECT_EQ(as_ring_peek(r.h, &len, &tgid, &busy), nullptr);
  EXPECT_EQ(busy, 42u);
  as_ring_skip_busy(r.h);
  std::vector<Record> got = drain(r.h);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].tgid, 7u);
  EXPECT_EQ(got[0].payload, bytes_of(16, 3));
}

// Writers in four threads and a forked process, a reader draining as they
// go: every record read once, intact, or counted lost.
TEST(SharedRing, ManyWritersLoseOnlyWhatTheyCount) {
  MemoryRing r(1 << 16);
  constexpr uint32_t kPerWriter = 20000;
  std::atomic<bool> done{false};
  std::vector<Record> got;
  auto write = [&](uint32_t writer) {
    for (uint32_t i = 0; i < kPerWriter; ++i) {
      std::vector<uint8_t> payload = bytes_of(8 + i % 200, uint8_t(i));
      std::memcpy(payload.data(), &i, sizeof i);
      while (!put(r.h, writer, payload))
        std::this_thread::yield();  // the test's writers retry; the preload drops
    }
  };
  // Fork before any thread starts: a child forked from threads may find
  // the allocator's locks held (ASan's are not fork-safe).
  pid_t child = fork();
  if (child == 0) {
    write(100);
    _exit(0);
  }
  std::thread reader([&] {
    while (!done.load()) {
      for (Record& rec : drain(r.h)) got.push_back(std::move(rec));
      std::this_thread::yield();
    }
    for (Record& rec : drain(r.h)) got.push_back(std::move(rec));
  });
  std::vector<std::thread> writers;
  for (uint32_t w = 1; w <= 4; ++w) writers.emplace_back(write, w);
  for (std::thread& t : writers) t.join();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  done = true;
  reader.join();
  ASSERT_EQ(got.size(), 5 * kPerWriter);
  std::vector<uint32_t> next(101, 0);
  for (const Record& rec : got) {
    ASSERT_LT(rec.tgid, next.size());
    uint32_t i = 0;
    std::memcpy(&i, rec.payload.data(), sizeof i);
    EXPECT_EQ(i, next[rec.tgid]++) << "writer " << rec.tgid << ": records in its order";
    std::vector<uint8_t> want = bytes_of(8 + i % 200, uint8_t(i));
    std::memcpy(want.data(), &i, sizeof i);
    EXPECT_EQ(rec.payload, want);
  }
}

}  // namespace
