/* Everything that can go wrong inside an interposed allocator: threads
 * allocating at once, a signal handler that allocates (interrupting malloc
 * itself), a forked child that allocates, frees the parent's blocks and
 * exits with a status of its own, realloc chains, aligned and C++-free
 * entry points, malloc_usable_size on every block. Prints a digest that
 * depends only on the program's own results, and exits with status 3, so
 * that a traced run can be compared with an untraced one byte for byte.
 *
 *   preload_stress [--rounds N] */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4

static int rounds = 20000;
static volatile sig_atomic_t handled;

static void on_alarm(int sig) {
  (void)sig;
  /* Not async-signal-safe by POSIX, but real programs do it. Delivered
   * only to a thread that never allocates outside the handler: the C
   * library's malloc is not reentrant, whatever traces it. */
  void *p = malloc(64 + handled % 512);
  if (p) memset(p, 1, 64);
  free(p);
  handled++;
}

static volatile int stop_signals;

static void *signal_thread(void *arg) {
  (void)arg;
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);
  while (!stop_signals) usleep(500);
  return NULL;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL; }

static void *work(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg, digest = 0;
  void *keep[64] = {0};
  for (int i = 0; i < rounds; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t size = 1 + (seed >> 40) % 4096;
    int slot = (int)((seed >> 20) % 64);
    switch ((seed >> 10) % 5) {
      case 0:
        free(keep[slot]);
        keep[slot] = malloc(size);
        break;
      case 1:
        free(keep[slot]);
        keep[slot] = calloc(1, size);
        break;
      case 2:
        keep[slot] = realloc(keep[slot], size);
        break;
      case 3:
        free(keep[slot]);
        keep[slot] = aligned_alloc(64, (size + 63) & ~(size_t)63);
        break;
      default: {
        void *p = NULL;
        free(keep[slot]);
        keep[slot] = posix_memalign(&p, 32, size) == 0 ? p : NULL;
      }
    }
    if (!keep[slot] || malloc_usable_size(keep[slot]) < size) {
      fprintf(stderr, "allocation of %zu bytes failed or too small\n", size);
      exit(1);
    }
    memset(keep[slot], (int)(i & 0xff), size);
    digest = mix(digest, size);
  }
  for (int i = 0; i < 64; i++) free(keep[i]);
  return (void *)(uintptr_t)digest;
}

int main(int argc, char **argv) {
  int signals = 1;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-signals"))
      signals = 0;
  /* Every thread but the signal thread blocks SIGALRM (the mask is
   * inherited by the threads and the child created below). */
  sigset_t alarm;
  sigemptyset(&alarm);
  sigaddset(&alarm, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &alarm, NULL);
  signal(SIGALRM, on_alarm);
  pthread_t signals_at;
  pthread_create(&signals_at, NULL, signal_thread, NULL);
  struct itimerval every = {{0, 200}, {0, 200}};
  if (signals) setitimer(ITIMER_REAL, &every, NULL);

  void *parent_blocks[256];
  for (int i = 0; i < 256; i++) parent_blocks[i] = malloc(1000 + i);
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 256; i++) free(parent_blocks[i]);
    uint64_t d = (uint64_t)(uintptr_t)work((void *)7);
    _exit((int)(d % 100) + 10);
  }

  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, (void *)(uintptr_t)(i + 1));
  uint64_t digest = 0;
  for (int i = 0; i < THREADS; i++) {
    void *r;
    pthread_join(t[i], &r);
    digest = mix(digest, (uint64_t)(uintptr_t)r);
  }
  while (signals && !handled) usleep(100); /* at least one signal, however fast the rest ran */
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  stop_signals = 1;
  pthread_join(signals_at, NULL);
  int status = 0;
  waitpid(child, &status, 0);
  for (int i = 0; i < 256; i++) free(parent_blocks[i]);
  printf("digest %016llx child %s %d signals %s\n", (unsigned long long)digest,
         WIFSIGNALED(status) ? "killed by" : "exited",
         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), handled > 0 ? "handled" : "none");
  return 3;
}
