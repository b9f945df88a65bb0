/* Fork isolation: the parent allocates and keeps FORKER_KEPT blocks, forks;
 * the child frees its copies of the very same addresses, allocates and keeps
 * FORKER_CHILD blocks of its own, and exits; the parent waits for it and
 * exits holding its blocks.
 *
 *   forker    (prints "child exited" once the child is gone) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forker_spec.h"

static void *kept[FORKER_KEPT];

__attribute__((noinline)) void *parent_keep(void) {
  void *p = malloc(FORKER_KEPT_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}
__attribute__((noinline)) void *child_keep(void) {
  void *p = malloc(FORKER_CHILD_SIZE);
  __asm__ volatile("" ::: "memory");
  return p;
}

int main(void) {
  for (int i = 0; i < FORKER_KEPT; i++) kept[i] = parent_keep();
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    for (int i = 0; i < FORKER_KEPT; i++) free(kept[i]);
    for (int i = 0; i < FORKER_CHILD; i++)
      if (!child_keep()) _exit(1);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  printf("child exited %d\n", WEXITSTATUS(status));
  fflush(stdout);
  return kept[FORKER_KEPT - 1] ? 0 : 1;
}
