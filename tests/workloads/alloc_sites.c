/* A workload with known allocation sites (see workload_spec.h): each thread
 * calls every site's allocator a known number of times with a known size,
 * frees what the spec says and keeps the rest until exit.
 *
 *   alloc_sites [--threads N] [--scale-pct P] [--double SITE] [--wait [--churn]] [--hold] [--exit-code C]
 *
 * --wait: print "ready" and wait for SIGUSR1 before allocating.
 * --churn: while waiting, a thread mallocs and frees 16 bytes, 1,000 pairs
 *   a millisecond at most, outside every site (a busy process to enter).
 * --hold: after allocating, print "done" and wait for SIGUSR1 before exiting.
 * --double SITE: that site makes twice its calls (for differential tests).
 * Output is deterministic, so traced and untraced runs print the same. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workload_spec.h"

static int g_scale = 100;
static const char *g_double = "";

struct kept {
  void **ptrs;
  uint32_t n;
};

static void keep_or_free(struct kept *k, void *p, uint32_t i, uint32_t count, int keep) {
  if (!p) abort();
  ((volatile char *)p)[0] = (char)i;
  if (i < site_kept(&(struct site_spec){.keep = keep}, count))
    k->ptrs[k->n++] = p;
  else
    free(p);
}

/* Each site calls its allocator directly and uses the result (no tail call),
 * so the allocator's return lands in the site. */
__attribute__((noinline)) void *site_malloc_small(void) {
  void *p = malloc(48);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_malloc_kept(void) {
  void *p = malloc(1000);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_calloc(void) {
  void *p = calloc(25, 40);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_realloc_seed(void) {
  void *p = malloc(4096);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_realloc(void *old) {
  void *p = realloc(old, 16384);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_posix_memalign(void) {
  void *p = NULL;
  if (posix_memalign(&p, 64, 2048) != 0) return NULL;
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_aligned_alloc(void) {
  void *p = aligned_alloc(256, 8192);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_large(void) {
  void *p = malloc(1 << 20);
  __asm__ volatile("" ::: "memory");
  return p;
}

static uint32_t count_of(int site) {
  uint32_t n = site_count(&kSites[site], g_scale);
  return strcmp(kSites[site].function, g_double) ? n : 2 * n;
}

__attribute__((noinline)) static void run_sites(struct kept *k) {
  void *(*simple[])(void) = {site_malloc_small,   site_malloc_kept,   site_calloc, NULL, NULL,
                             site_posix_memalign, site_aligned_alloc, site_large};
  for (size_t s = 0; s < N_SITES; ++s) {
    uint32_t count = count_of((int)s);
    if (simple[s]) {
      for (uint32_t i = 0; i < count; ++i) keep_or_free(k, simple[s](), i, count, kSites[s].keep);
    } else if (s == 4) { /* site_realloc grows each seed block */
      for (uint32_t i = 0; i < count; ++i)
        keep_or_free(k, site_realloc(site_realloc_seed()), i, count, kSites[s].keep);
    }
  }
}

static void *thread_main(void *arg) {
  run_sites(arg);
  return NULL;
}

static volatile int g_churning;

__attribute__((noinline)) static void *churn(void *arg) {
  (void)arg;
  const struct timespec ms = {0, 1000000};
  while (__atomic_load_n(&g_churning, __ATOMIC_RELAXED)) {
    for (int i = 0; i < 1000; ++i) {
      volatile char *p = malloc(16);
      if (!p) abort();
      p[0] = (char)i;
      free((void *)p);
    }
    nanosleep(&ms, NULL);
  }
  return NULL;
}

static void wait_usr1(const char *message) {
  printf("%s\n", message);
  fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  int sig;
  sigwait(&set, &sig);
}

int main(int argc, char **argv) {
  int threads = 2, wait = 0, hold = 0, exit_code = 0, churning = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--scale-pct") && i + 1 < argc)
      g_scale = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--exit-code") && i + 1 < argc)
      exit_code = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--double") && i + 1 < argc)
      g_double = argv[++i];
    else if (!strcmp(argv[i], "--wait"))
      wait = 1;
    else if (!strcmp(argv[i], "--hold"))
      hold = 1;
    else if (!strcmp(argv[i], "--churn"))
      churning = 1;
    else {
      fprintf(
          stderr,
          "usage: %s [--threads N] [--scale-pct P] [--double SITE] [--wait [--churn]] [--hold] [--exit-code "
          "C]\n",
          argv[0]);
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || g_scale < 1) return 2;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  pthread_t churner;
  g_churning = churning && wait;
  if (g_churning && pthread_create(&churner, NULL, churn, NULL) != 0) return 1;
  if (wait) wait_usr1("ready");
  if (g_churning) {
    __atomic_store_n(&g_churning, 0, __ATOMIC_RELAXED);
    pthread_join(churner, NULL);
  }

  size_t per_thread = 0;
  for (size_t s = 0; s < N_SITES; ++s) per_thread += count_of((int)s);
  pthread_t tids[64];
  struct kept kept[64];
  for (int t = 0; t < threads; ++t) {
    kept[t].ptrs = malloc(per_thread * sizeof(void *)); /* made before recording matters: outside any site */
    kept[t].n = 0;
    if (!kept[t].ptrs || pthread_create(&tids[t], NULL, thread_main, &kept[t]) != 0) return 1;
  }
  uint64_t live = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(tids[t], NULL);
    live += kept[t].n;
  }
  printf("threads %d scale %d%% live blocks %llu\n", threads, g_scale, (unsigned long long)live);
  if (hold) wait_usr1("done");
  return exit_code;
}
