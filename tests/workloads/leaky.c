/* A leak among churn and a cache, at known rates: site_leak's 200-byte
 * blocks are never freed (LEAK bytes a second), site_churn's 64-byte blocks
 * are freed at once (2 MB a second), and site_cache fills 1 MB in the first
 * tenth of a second and keeps it. Paced by the clock in 10 ms ticks.
 *
 *   leaky [--seconds S] [--leak BYTES_PER_SECOND] [--free-at-exit]
 *   (defaults: 6, 400000; 0: no leak)
 *
 * Prints "leaked N bytes in T s" at the end, then exits (the blocks it kept
 * are still allocated when it exits; with --free-at-exit every block is
 * freed first, as a program that cleans up at exit does). */
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
  int free_at_exit = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--leak") && i + 1 < argc)
      leak_rate = atol(argv[++i]);
    else if (!strcmp(argv[i], "--free-at-exit"))
      free_at_exit = 1;
    else {
      fprintf(stderr, "usage: %s [--seconds S] [--leak BYTES_PER_SECOND] [--free-at-exit]\n", argv[0]);
      return 2;
    }
  }
  void **cache = malloc(CACHE_BLOCKS * sizeof *cache);
  if (!cache) return 1;
  double start = now_s();
  for (int i = 0; i < CACHE_BLOCKS; ++i) cache[i] = site_cache();
  const double tick = 0.01;
  long ticks = (long)(seconds / tick), leaked = 0;
  /* With --free-at-exit the leaked blocks are kept to be freed: room for all. */
  size_t kept_max = free_at_exit ? (size_t)((double)leak_rate * seconds / LEAK_SIZE) + 2 : 0, kept_n = 0;
  void **kept = kept_max ? malloc(kept_max * sizeof *kept) : NULL;
  if (kept_max && !kept) return 1;
  double owed = 0; /* leak bytes due but not yet allocated */
  for (long t = 0; t < ticks; ++t) {
    owed += (double)leak_rate * tick;
    for (; owed >= LEAK_SIZE; owed -= LEAK_SIZE, leaked += LEAK_SIZE) {
      void *p = site_leak();
      if (!p) return 1;
      if (kept_n < kept_max) kept[kept_n++] = p;
    }
    for (int i = 0; i < 2000000 * tick / CHURN_SIZE; ++i) free(site_churn());
    sleep_until(start + (double)(t + 1) * tick);
  }
  printf("leaked %ld bytes in %.3f s\n", leaked, now_s() - start);
  fflush(stdout);
  if (free_at_exit) {
    for (size_t i = 0; i < kept_n; ++i) free(kept[i]);
    for (int i = 0; i < CACHE_BLOCKS; ++i) free(cache[i]);
    free(kept);
    free(cache);
  }
  return 0;
}
