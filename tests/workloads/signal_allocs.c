/* Allocations above a signal frame: a handler, run by a signal raised from
 * raise_here(), allocates SIGNAL_CALLS blocks of SIGNAL_SIZE bytes, then
 * forks a child that allocates as many again from inside the handler (as
 * PostgreSQL 15's postmaster starts its backends) and waits for it. Built
 * without frame pointers: only the call frame information leads out. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIGNAL_CALLS 64
#define SIGNAL_SIZE 40000

void *volatile sink;

__attribute__((noinline)) void alloc_in_handler(void) {
  for (int i = 0; i < SIGNAL_CALLS; i++) {
    sink = malloc(SIGNAL_SIZE);
    free(sink);
  }
}

__attribute__((noinline)) void alloc_in_forked_child(void) { alloc_in_handler(); }

static void on_signal(int sig) {
  (void)sig;
  alloc_in_handler();
  pid_t child = fork();
  if (child == 0) {
    alloc_in_forked_child();
    _exit(0);
  }
  int status = 0;
  if (child > 0) waitpid(child, &status, 0);
}

__attribute__((noinline)) void raise_here(void) {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

int main(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  raise_here();
  return 0;
}
