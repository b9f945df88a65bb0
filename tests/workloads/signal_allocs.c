/* Allocations above a signal frame: a handler, run by a signal raised from
 * raise_here() (or, with --async, by a timer's signal that strikes the loop
 * of spin_until_signal()), allocates SIGNAL_CALLS blocks of SIGNAL_SIZE
 * bytes, then forks a child that allocates as many again from inside the
 * handler (as PostgreSQL 15's postmaster starts its backends) and waits for
 * it. Built without frame pointers: only the call frame information leads
 * out. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIGNAL_CALLS 64
#define SIGNAL_SIZE 40000

void *volatile sink;
static volatile sig_atomic_t handled;

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
  handled = 1;
}

__attribute__((noinline)) void raise_here(void) {
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

/* Where a timer's signal strikes: code the program's own CFI describes
 * (the C library's need not have any: musl's has none). */
__attribute__((noinline)) void spin_until_signal(void) {
  struct itimerval once = {{0, 0}, {0, 1000}};
  setitimer(ITIMER_REAL, &once, NULL);
  while (!handled) {
  }
}

int main(int argc, char **argv) {
  int async = argc > 1 && strcmp(argv[1], "--async") == 0;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(async ? SIGALRM : SIGUSR1, &sa, NULL);
  if (async)
    spin_until_signal();
  else
    raise_here();
  return 0;
}
