/* A program that samples its own allocations and fires the OpenTelemetry
 * memory-profiling probes in their standard form, otel_memory:alloc(ptr,
 * size, weighted_bytes) and otel_memory:free(ptr), the way a third-party
 * allocator would: allocscope must record it through the probes alone.
 * Its sampler: Poisson sampling of bytes at mean OTEL_RATE, each sample
 * weighted size / P(sampled). Allocates OTEL_BLOCKS blocks of each size in
 * otel_sizes (otel_provider_spec.h) from its own function per size, keeps
 * every other one.
 *
 *   otel_provider [--wait]   with --wait: prints "ready", allocates at the
 *                            first SIGUSR1, prints "done", exits at the next */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>
#include <unistd.h>

#include "otel_provider_spec.h"

static uint64_t rng = 88172645463325252ULL;

static double uniform(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((rng >> 11) + 0.5) / 9007199254740992.0;
}

static double countdown = -1;

/* The probe fires in the entry point the program calls (the standard form's
 * convention), never inlined into its caller. */
__attribute__((noinline)) static void *traced_malloc(size_t size) {
  void *p = malloc(size);
  if (countdown < 0) countdown = -log(uniform()) * OTEL_RATE;
  countdown -= (double)size;
  if (countdown < 0) {
    uint64_t weight = (uint64_t)llround((double)size / -expm1(-(double)size / OTEL_RATE));
    while (countdown < 0) countdown += -log(uniform()) * OTEL_RATE;
    STAP_PROBE3(otel_memory, alloc, p, size, weight);
  }
  return p;
}

static void traced_free(void *p) {
  STAP_PROBE1(otel_memory, free, p); /* fired for every free: allocscope matches */
  free(p);
}

static volatile sig_atomic_t go;
static void on_usr1(int sig) {
  (void)sig;
  go = 1;
}

#define SITE(n)                                               \
  __attribute__((noinline)) void otel_site_##n(void **keep) { \
    for (int i = 0; i < OTEL_BLOCKS; i++) {                   \
      void *p = traced_malloc(otel_sizes[n]);                 \
      memset(p, 0, 8);                                        \
      if (i % 2)                                              \
        traced_free(p);                                       \
      else                                                    \
        keep[i / 2] = p;                                      \
    }                                                         \
  }
SITE(0)
SITE(1)
SITE(2)

int main(int argc, char **argv) {
  int wait = argc > 1 && !strcmp(argv[1], "--wait");
  signal(SIGUSR1, on_usr1);
  static void *keep[3][OTEL_BLOCKS / 2];
  printf("ready\n");
  fflush(stdout);
  while (wait && !go) pause();
  go = 0;
  otel_site_0(keep[0]);
  otel_site_1(keep[1]);
  otel_site_2(keep[2]);
  printf("done\n");
  fflush(stdout);
  while (wait && !go) pause();
  return 0;
}
