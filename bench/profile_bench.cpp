// Userspace cost of aggregation: nanoseconds per sample event and memory,
// as the number of distinct stacks and of live samples grows. Feeds the same
// Profile the recorder uses with synthetic samples (20-frame stacks).
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "model/profile.h"

using namespace allocscope;

namespace {

// Bytes in use by malloc: unlike RSS, not hidden by memory an earlier run
// freed and malloc kept.
double heap_in_use() { return double(mallinfo2().uordblks); }

std::vector<std::vector<uint64_t>> make_stacks(size_t n, std::mt19937_64& rng) {
  std::vector<std::vector<uint64_t>> stacks(n, std::vector<uint64_t>(20));
  for (auto& s : stacks)
    for (uint64_t& ip : s) ip = 0x400000 + rng() % 0x100000;
  return stacks;
}

// ns per alloc event with `distinct` stacks, all freed again (live stays small).
double alloc_free_ns(size_t distinct, size_t events) {
  std::mt19937_64 rng(1);
  auto stacks = make_stacks(distinct, rng);
  Profile p(512 * 1024, 1 << 22, 1 << 22);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < events; ++i) {
    p.on_alloc({.pid = 1,
                .fn = 0,
                .addr = 0x1000 + i * 16,
                .size = 64,
                .offset = 0,
                .ts_ns = i,
                .live_tracked = true,
                .ips = stacks[i % distinct]});
    p.on_free(1, 0x1000 + i * 16, i + 1);
  }
  auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / double(events);
}

// Bytes of userspace memory per live sample, with `live` samples held.
double bytes_per_live(size_t live) {
  std::mt19937_64 rng(2);
  auto stacks = make_stacks(100, rng);
  Profile p(512 * 1024, 1 << 22, 1 << 22);
  p.on_alloc({.pid = 1,
              .fn = 0,
              .addr = 0,
              .size = 64,
              .offset = 0,
              .ts_ns = 0,
              .live_tracked = true,
              .ips = stacks[0]});
  double before = heap_in_use();
  for (size_t i = 1; i <= live; ++i)
    p.on_alloc({.pid = 1,
                .fn = 0,
                .addr = 0x1000 + i * 16,
                .size = 64,
                .offset = 0,
                .ts_ns = i,
                .live_tracked = true,
                .ips = stacks[i % stacks.size()]});
  return (heap_in_use() - before) / double(live);
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = argc > 1 && std::string(argv[1]) == "--smoke";
  size_t events = smoke ? 20000 : 1000000;
  std::printf("| distinct stacks | ns per alloc+free event |\n|---:|---:|\n");
  for (size_t d : {10u, 100u, 1000u, 10000u, 100000u})
    std::printf("| %zu | %.0f |\n", d, alloc_free_ns(d, std::max(events, d * 2)));
  std::printf("\n| live samples | userspace bytes per live sample |\n|---:|---:|\n");
  for (size_t l : {1000u, 10000u, 100000u, 1000000u}) {
    if (smoke && l > 10000) break;
    std::printf("| %zu | %.0f |\n", l, bytes_per_live(l));
  }
  return 0;
}
