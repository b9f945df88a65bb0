/* A program that allocates through its allocator's own entry points, not
 * malloc: jemalloc's mallocx, rallocx and sdallocx, tcmalloc's tc_malloc,
 * tc_realloc and tc_free_sized, or mimalloc's mi_malloc, mi_realloc and
 * mi_free_size (one of them, chosen when built: -DAPI_JEMALLOC,
 * -DAPI_TCMALLOC or -DAPI_MIMALLOC, linked against that allocator).
 *
 *   allocator_apis COUNT [now]
 *
 * Prints "ready" and waits for SIGUSR1 (with `now`, goes on at once); then,
 * COUNT times each: api_small
 * allocates 100 bytes, api_grow resizes that block to 4000 (the small one
 * freed by it), api_kept allocates 1000. Every other grown block is freed
 * (sized). Prints "done", waits for SIGUSR1 again (not with `now`), frees
 * the rest, exits 0. In use at "done": COUNT/2 blocks of api_grow's, COUNT of api_kept's,
 * none of api_small's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(API_JEMALLOC)
void *mallocx(size_t size, int flags);
void *rallocx(void *p, size_t size, int flags);
void sdallocx(void *p, size_t size, int flags);
#define API_ALLOC(n) mallocx(n, 0)
#define API_RESIZE(p, n) rallocx(p, n, 0)
#define API_FREE(p, n) sdallocx(p, n, 0)
#elif defined(API_TCMALLOC)
void *tc_malloc(size_t size);
void *tc_realloc(void *p, size_t size);
void tc_free_sized(void *p, size_t size);
#define API_ALLOC(n) tc_malloc(n)
#define API_RESIZE(p, n) tc_realloc(p, n)
#define API_FREE(p, n) tc_free_sized(p, n)
#elif defined(API_MIMALLOC)
void *mi_malloc(size_t size);
void *mi_realloc(void *p, size_t size);
void mi_free_size(void *p, size_t size);
#define API_ALLOC(n) mi_malloc(n)
#define API_RESIZE(p, n) mi_realloc(p, n)
#define API_FREE(p, n) mi_free_size(p, n)
#else
#error "build with -DAPI_JEMALLOC, -DAPI_TCMALLOC or -DAPI_MIMALLOC"
#endif

enum { kSmall = 100, kGrown = 4000, kKept = 1000 };

__attribute__((noinline)) static void *api_small(void) { return API_ALLOC(kSmall); }
__attribute__((noinline)) static void *api_grow(void *p) { return API_RESIZE(p, kGrown); }
__attribute__((noinline)) static void *api_kept(void) { return API_ALLOC(kKept); }

static int now;

static void wait_usr1(const sigset_t *set) {
  int sig;
  if (!now) sigwait(set, &sig);
}

int main(int argc, char **argv) {
  long count = argc > 1 ? atol(argv[1]) : 10000;
  now = argc > 2 && strcmp(argv[2], "now") == 0;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigprocmask(SIG_BLOCK, &set, NULL);
  void **grown = calloc((size_t)count, sizeof *grown), **kept = calloc((size_t)count, sizeof *kept);
  if (!grown || !kept) return 1;
  printf("ready\n");
  fflush(stdout);
  wait_usr1(&set);
  for (long i = 0; i < count; i++) {
    grown[i] = api_grow(api_small());
    kept[i] = api_kept();
    if (!grown[i] || !kept[i]) return 1;
  }
  for (long i = 0; i < count; i += 2) {
    API_FREE(grown[i], kGrown);
    grown[i] = NULL;
  }
  printf("done\n");
  fflush(stdout);
  wait_usr1(&set);
  for (long i = 0; i < count; i++) {
    if (grown[i]) API_FREE(grown[i], kGrown);
    API_FREE(kept[i], kKept);
  }
  free(grown);
  free(kept);
  return 0;
}
