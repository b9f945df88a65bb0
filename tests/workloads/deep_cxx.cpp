// C++ stacks as deep as a compiler's, built as distributions build
// (-O2 -fomit-frame-pointer): template recursions 71 and 91 frames deep end
// in two allocation sites (deep_cxx_spec.h). Some levels keep a number in
// rbp while they run, as code without frame pointers may, so a frame-pointer
// walk through them finds garbage; call frame information finds the callers.
//   deep_cxx [--churn N] [--kept N] [--wait]
// --wait: waits for SIGUSR1 before allocating (for attaching).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <vector>

#include "deep_cxx_spec.h"

namespace {

struct Ctx {
  long count = 0;
  std::vector<char*> kept;
  long sink = 0;
};

volatile sig_atomic_t g_go = 0;
void on_usr1(int) { g_go = 1; }

}  // namespace

__attribute__((noinline)) void deep_churn_site(Ctx& c) {
  for (long i = 0; i < c.count; ++i) {
    char* p = new char[kChurnSizes[i % 4]];
    p[0] = char(i);
    c.sink += p[0];
    delete[] p;
  }
}

__attribute__((noinline)) void deep_kept_site(Ctx& c) {
  for (long i = 0; i < c.count; ++i) {
    char* p = new char[kKeptSize];
    p[0] = char(i);
    c.kept.push_back(p);  // reserved in main: no growth here
  }
}

template <int N, int Site>
struct Level {
  __attribute__((noinline)) static long run(Ctx& c, long x);
};

template <int N, int Site>
long Level<N, Site>::run(Ctx& c, long x) {
  volatile char pad[16 + (N % 5) * 24];
  pad[x & 15] = char(x);
  if constexpr (N % 7 == 3)  // rbp holds a number while the levels below run
    __asm__ volatile("mov %0, %%rbp" : : "r"(x * 7 + N) : "rbp");
  long r;
  if constexpr (N == 0) {
    if constexpr (Site == 0)
      deep_churn_site(c);
    else
      deep_kept_site(c);
    r = c.sink;
  } else {
    r = Level<N - 1, Site>::run(c, x + 1);
  }
  return r + pad[x & 15];  // work after the call: no tail call
}

int main(int argc, char** argv) {
  long churn = kChurnDefault, kept = kKeptDefault;
  bool wait = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--churn") && i + 1 < argc)
      churn = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--kept") && i + 1 < argc)
      kept = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--wait"))
      wait = true;
    else
      return 2;
  }
  Ctx c;
  c.kept.reserve(size_t(kept));
  if (wait) {
    std::signal(SIGUSR1, on_usr1);
    std::printf("ready\n");
    std::fflush(stdout);
    while (!g_go) pause();
  }
  c.count = churn;
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long r = Level<kChurnDepth, 0>::run(c, 1);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = double(t1.tv_sec - t0.tv_sec) + double(t1.tv_nsec - t0.tv_nsec) / 1e9;
  c.count = kept;
  r += Level<kKeptDepth, 1>::run(c, 1);
  // new and delete: two allocator calls per churn iteration.
  std::printf("churn_calls_per_second %.0f\ndone %ld %zu\n", 2.0 * double(churn) / s, r & 1, c.kept.size());
  return 0;
}
