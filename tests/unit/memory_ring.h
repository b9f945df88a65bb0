// A shared ring (preload/shared_ring.h) for unit tests: `size` data bytes
// in anonymous memory that a fork shares.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>

#include "abi/preload/shared_ring.h"

struct MemoryRing {
  explicit MemoryRing(uint64_t size) : bytes(AS_RING_HEADER_BYTES + size) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    h = static_cast<as_ring_header*>(p);
    h->size = size;
  }
  ~MemoryRing() { munmap(h, bytes); }
  MemoryRing(const MemoryRing&) = delete;
  size_t bytes;
  as_ring_header* h;
};
