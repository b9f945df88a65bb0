/* Two allocation sites with known lifetimes: site_long's blocks are made
 * first and kept until the process exits; then site_short's blocks are each
 * freed after ~10 ms.
 *
 *   lifetimes [--rounds N]     (default 100: about 1 s)
 *
 * Prints "done" when finished. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIZE (64 * 1024)

__attribute__((noinline)) void *site_short(void) {
  void *p = malloc(SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *site_long(void) {
  void *p = malloc(SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  int rounds = 100;
  if (argc == 3 && !strcmp(argv[1], "--rounds"))
    rounds = atoi(argv[2]);
  else if (argc != 1) {
    fprintf(stderr, "usage: %s [--rounds N]\n", argv[0]);
    return 2;
  }
  void **kept = calloc((size_t)rounds, sizeof(void *));
  if (!kept) return 1;
  for (int i = 0; i < rounds; ++i)
    if (!(kept[i] = site_long())) return 1;
  for (int i = 0; i < rounds; ++i) {
    void *p = site_short();
    if (!p) return 1;
    memset(p, 1, 64);
    sleep_ms(10);
    free(p);
  }
  printf("done\n");
  fflush(stdout);
  return 0;
}
