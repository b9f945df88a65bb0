/* A leak among churn and a cache, at known rates: site_leak's 200-byte
 * blocks are never freed (LEAK bytes a second), site_churn's 64-byte blocks
 * are freed at once (2 MB a second), and site_cache fills 1 MB in the first
 * tenth of a second and keeps it. Paced by the clock in 10 ms ticks.
 *
 *   leaky [--seconds S] [--leak BYTES_PER_SECOND]   (defaults: 6, 400000; 0: no leak)
 *
 * Prints "leaked N bytes in T s" at the end, then exits (the blocks it kept
 * are still allocated when it exits). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEAK_SIZE 200
#define CHURN_SIZE 64
#define CACHE_BLOCKS 10000
#define CACHE_SIZE 100

__attribute__((noinline)) void *site_leak(void) {
  void *p = malloc(LEAK_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_churn(void) {
  void *p = malloc(CHURN_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_cache(void) {
  void *p = malloc(CACHE_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_until(double t) {
  double d = t - now_s();
  if (d <= 0) return;
  struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  double seconds = 6;
  long leak_rate = 400000;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--leak") && i + 1 < argc)
      leak_rate = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--seconds S] [--leak BYTES_PER_SECOND]\n", argv[0]);
      return 2;
    }
  }
  void **cache = malloc(CACHE_BLOCKS * sizeof *cache);
  if (!cache) return 1;
  double start = now_s();
  for (int i = 0; i < CACHE_BLOCKS; ++i) cache[i] = site_cache();
  const double tick = 0.01;
  long ticks = (long)(seconds / tick), leaked = 0;
  double owed = 0; /* leak bytes due but not yet allocated */
  for (long t = 0; t < ticks; ++t) {
    owed += (double)leak_rate * tick;
    for (; owed >= LEAK_SIZE; owed -= LEAK_SIZE, leaked += LEAK_SIZE)
      if (!site_leak()) return 1;
    for (int i = 0; i < 2000000 * tick / CHURN_SIZE; ++i) free(site_churn());
    sleep_until(start + (double)(t + 1) * tick);
  }
  printf("leaked %ld bytes in %.3f s\n", leaked, now_s() - start);
  fflush(stdout);
  return 0;
}
