/* A heap that rises and falls: site_burst allocates BURST bytes in 1000-byte
 * blocks, holds them for HOLD seconds and frees them all; then site_steady
 * allocates STEADY bytes in 500-byte blocks and keeps them until exit. The
 * live heap is highest (BURST bytes, all at site_burst) during the hold and
 * ends at STEADY bytes, all at site_steady.
 *
 *   phases [--burst BYTES] [--steady BYTES] [--hold SECONDS]
 *          (defaults: 40000000, 10000000, 0.5)
 *
 * Prints "peak B bytes at site_burst; end S bytes at site_steady". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BURST_SIZE 1000
#define STEADY_SIZE 500

__attribute__((noinline)) void *site_burst(void) {
  void *p = malloc(BURST_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_steady(void) {
  void *p = malloc(STEADY_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void pause_for(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  long burst = 40000000, steady = 10000000;
  double hold = 0.5;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--burst") && i + 1 < argc)
      burst = atol(argv[++i]);
    else if (!strcmp(argv[i], "--steady") && i + 1 < argc)
      steady = atol(argv[++i]);
    else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
      hold = atof(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--burst BYTES] [--steady BYTES] [--hold SECONDS]\n", argv[0]);
      return 2;
    }
  }
  long n_burst = burst / BURST_SIZE, n_steady = steady / STEADY_SIZE;
  void **held = malloc((size_t)(n_burst > 0 ? n_burst : 1) * sizeof *held);
  void **kept = malloc((size_t)(n_steady > 0 ? n_steady : 1) * sizeof *kept);
  if (!held || !kept) return 1;
  for (long i = 0; i < n_burst; ++i) held[i] = site_burst();
  pause_for(hold);
  for (long i = 0; i < n_burst; ++i) free(held[i]);
  for (long i = 0; i < n_steady; ++i) kept[i] = site_steady();
  pause_for(hold);
  printf("peak %ld bytes at site_burst; end %ld bytes at site_steady\n", n_burst * BURST_SIZE,
         n_steady * STEADY_SIZE);
  return 0;
}
