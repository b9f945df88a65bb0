/* An allocation site reached through an inlined helper: make_buffer() is
 * always inlined into site_inlined(), so the malloc call's return address
 * lies in site_inlined's code while DWARF says it is make_buffer's line,
 * inlined at a line of site_inlined.
 *
 *   inlined [--print-addr]
 *
 * Default: allocates BLOCKS blocks of SIZE bytes, keeps them, prints "done".
 * --print-addr: prints (hex) the return address of a call made from the
 * inlined helper on the malloc's own line, then waits until killed, so a
 * test can symbolize that address in the live process.
 * The marker comments name the lines tests expect. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCKS 100
#define SIZE 4096

static int g_print_addr;

/* Called right after malloc, on the same source line: its return address is
 * a frame that sits where the malloc call does. */
__attribute__((noinline, noclone)) void note_block(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
  if (!g_print_addr) return;
  printf("%p\n", __builtin_return_address(0));
  fflush(stdout);
  for (;;) pause();
}

static inline __attribute__((always_inline)) void *make_buffer(size_t n) {
  /* The marker's line holds the malloc call and the note at its return. */
  // clang-format off
  void *p = malloc(n); note_block(p); /* MARK_MAKE_BUFFER */
  // clang-format on
  return p;
}

__attribute__((noinline, noclone)) void *site_inlined(void) {
  return make_buffer(SIZE); /* MARK_SITE_INLINED */
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--print-addr"))
    g_print_addr = 1;
  else if (argc != 1) {
    fprintf(stderr, "usage: %s [--print-addr]\n", argv[0]);
    return 2;
  }
  static void *kept[BLOCKS];
  for (int i = 0; i < BLOCKS; ++i)
    if (!(kept[i] = site_inlined())) /* MARK_MAIN */
      return 1;
  printf("done\n");
  fflush(stdout);
  /* Linger a moment: a tracer reads a process's mappings while it lives, and
   * this one would otherwise be gone within a millisecond. */
  usleep(200 * 1000);
  return 0;
}
