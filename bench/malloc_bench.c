/* malloc microbenchmark: balanced malloc/free pairs through a few stack
 * levels, mostly small sizes with some large ones, on several threads.
 * Prints the nanoseconds per malloc+free pair measured inside the process,
 * so the time a tracer takes to attach is not counted: wall time per pair,
 * and CPU time per pair (the mean over threads).
 *
 *   malloc_bench [--threads N] [--pairs N] [--size BYTES] [--wait]
 *
 * --pairs: per thread (default 2,000,000). --size: every allocation this
 * size instead of the mix. --wait: print "ready", start on SIGUSR1. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 256 /* live blocks per thread: frees hit recently used memory */
#define SIZES 4096

static long g_pairs = 2000000;
static size_t g_fixed_size = 0;
static size_t g_sizes[SIZES];

/* 63 of 64 allocations 16..256 bytes, one 4 KiB..256 KiB. */
static void make_sizes(void) {
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < SIZES; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    g_sizes[i] = g_fixed_size ? g_fixed_size : (i % 64 == 63) ? 4096 + x % (252 * 1024) : 16 + x % 241;
  }
}

__attribute__((noinline)) static void *level3(size_t n) {
  void *p = malloc(n);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) static void *level2(size_t n) {
  void *p = level3(n);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) static void *level1(size_t n) {
  void *p = level2(n);
  __asm__ volatile("" ::: "memory");
  return p;
}

static double thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Each worker's CPU time (user + system: a uprobe trap is the thread's own
 * system time), so that time-sharing with other processes does not count. */
static void *worker(void *arg) {
  double *cpu = arg, start = thread_cpu_ns();
  void *slots[SLOTS] = {0};
  for (long i = 0; i < g_pairs; ++i) {
    unsigned s = (unsigned)i % SLOTS;
    free(slots[s]);
    slots[s] = level1(g_sizes[i % SIZES]);
    if (!slots[s]) abort();
    *(volatile char *)slots[s] = 1;
  }
  for (unsigned s = 0; s < SLOTS; ++s) free(slots[s]);
  *cpu = thread_cpu_ns() - start;
  return NULL;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
  int threads = 1, wait = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pairs") && i + 1 < argc)
      g_pairs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc)
      g_fixed_size = (size_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--wait"))
      wait = 1;
    else {
      fprintf(stderr, "usage: %s [--threads N] [--pairs N] [--size BYTES] [--wait]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || g_pairs < 1) return 2;
  make_sizes();
  if (wait) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    printf("ready\n");
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
  }
  pthread_t tids[64];
  double cpu[64], cpu_sum = 0;
  double start = now_ns();
  for (int t = 0; t < threads; ++t) pthread_create(&tids[t], NULL, worker, &cpu[t]);
  for (int t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  double elapsed = now_ns() - start;
  for (int t = 0; t < threads; ++t) cpu_sum += cpu[t];
  /* Per pair and thread: what one thread's malloc+free costs. */
  printf("ns_per_pair %.1f\ncpu_ns_per_pair %.1f\n", elapsed / (double)g_pairs,
         cpu_sum / threads / (double)g_pairs);
  return 0;
}
