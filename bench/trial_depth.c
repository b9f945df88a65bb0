/* The sampled trial's cost by stack depth (bench/trial_cost.py): descends
 * `depth` frames, then makes malloc/free pairs of one size there, and prints
 * the nanoseconds a pair took inside the process (CPU time of the loop, so
 * a tracer's start and end are not counted). With --hold it then waits for
 * its standard input to close, while the tracer's figures are read.
 *
 *   trial_depth [--depth N] [--pairs N] [--size BYTES] [--hold] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__clang__)
#define FRAME __attribute__((noinline, used))
#else
#define FRAME __attribute__((noipa, used))
#endif

static long g_pairs = 200000;
static size_t g_size = 4096;

static double cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

FRAME static double pairs(void) {
  double start = cpu_ns();
  for (long i = 0; i < g_pairs; i++) {
    void *p = malloc(g_size);
    __asm__ volatile("" : : "r"(p) : "memory");
    free(p);
  }
  return (cpu_ns() - start) / (double)g_pairs;
}

/* One frame each: the pairs run `depth` frames below main. */
FRAME static double descend(int depth) {
  double ns = depth <= 1 ? pairs() : descend(depth - 1);
  __asm__ volatile("" : : : "memory"); /* not a tail call */
  return ns;
}

int main(int argc, char **argv) {
  int depth = 30, hold = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--depth") && i + 1 < argc)
      depth = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
      g_pairs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      g_size = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--hold"))
      hold = 1;
    else {
      fprintf(stderr, "usage: trial_depth [--depth N] [--pairs N] [--size BYTES] [--hold]\n");
      return 2;
    }
  }
  printf("cpu_ns_per_pair %.1f\n", descend(depth < 1 ? 1 : depth));
  fflush(stdout);
  if (hold) {
    char c;
    while (read(0, &c, 1) > 0) {
    }
  }
  return 0;
}
