/* A program for allocscope to enter while it runs (record -p): threads
 * asleep in the calls a stop interrupts (epoll_wait with and without a
 * timeout, nanosleep, poll, a condition wait, a pipe read, sigtimedwait),
 * and one that allocates a fixed sequence of blocks, its digest printed at
 * the end. It counts every EINTR it sees (it installs no handler that
 * could cause one), checks that a signal it sends itself reaches its
 * handler, and says whose malloc its own slot points at when it ends.
 *
 *   inject_target [--seconds S] [--batches N]
 *
 * Prints "ready", then at the end "digest D eintr E errno-changed C handled H fds F malloc-from NAME";
 * exits 0 when no EINTR was seen and the signal was handled. SIGTERM ends
 * it sooner (an EINTR then is its handler's, not counted). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static int eintr;
static int wake_fd, pipe_fds[2];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static volatile sig_atomic_t handled, ending;

/* errno as a thread left it before a call that succeeds: still that after. */
static int errno_changed;
enum { kMark = 4242 };
static void check_errno(int r) {
  if (r >= 0 && errno != kMark) __atomic_add_fetch(&errno_changed, 1, __ATOMIC_RELAXED);
}

static void count(const char *what, int r) {
  if (r < 0 && errno == EINTR && !ending) {
    fprintf(stderr, "EINTR in %s\n", what);
    __atomic_add_fetch(&eintr, 1, __ATOMIC_RELAXED);
  }
}

static void *epoll_forever(void *arg) {
  (void)arg;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd, &ev);
  while (!stop) count("epoll_wait(-1)", epoll_wait(ep, &ev, 1, -1));
  close(ep);
  return NULL;
}

static void *epoll_timed(void *arg) {
  (void)arg;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev;
  while (!stop) count("epoll_wait(50)", epoll_wait(ep, &ev, 1, 50));
  close(ep);
  return NULL;
}

static void *sleeper(void *arg) {
  (void)arg;
  while (!stop) {
    struct timespec t = {0, 30 * 1000 * 1000};
    errno = kMark;
    int r = nanosleep(&t, NULL);
    count("nanosleep", r);
    check_errno(r);
    errno = kMark;
    r = poll(NULL, 0, 20);
    count("poll", r);
    check_errno(r);
  }
  return NULL;
}

static void *waiter(void *arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  while (!stop) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  return NULL;
}

static void *reader(void *arg) {
  (void)arg;
  char c;
  while (!stop) {
    errno = kMark;
    int r = (int)read(pipe_fds[0], &c, 1);
    count("read", r);
    check_errno(r);
  }
  return NULL;
}

static void *signal_waiter(void *arg) {
  (void)arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  struct timespec t = {0, 40 * 1000 * 1000};
  while (!stop) {
    int r = sigtimedwait(&set, NULL, &t);
    if (r < 0 && errno != EAGAIN) count("sigtimedwait", r);
  }
  return NULL;
}

/* A fixed sequence of blocks, each written and read back. */
struct work {
  int batches;
  uint64_t digest;
};

static void *allocator(void *arg) {
  struct work *w = arg;
  int batches = w->batches;
  uint64_t digest = 1469598103934665603ULL, x = 88172645463325252ULL;
  void *kept[256] = {0};
  for (int b = 0; b < batches; b++) {
    for (int i = 0; i < 2000; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t size = 16 + x % 4000, slot = (x >> 20) % 256;
      unsigned char *p = malloc(size);
      memset(p, (int)(x & 0xff), size);
      digest = (digest ^ p[size - 1] ^ size) * 1099511628211ULL;
      free(kept[slot]);
      kept[slot] = p;
    }
    struct timespec t = {0, 1000 * 1000};
    count("nanosleep(allocator)", nanosleep(&t, NULL));
  }
  for (int i = 0; i < 256; i++) free(kept[i]);
  w->digest = digest;
  return NULL;
}

static void on_usr1(int sig) {
  (void)sig;
  handled++;
}

static void on_term(int sig) {
  (void)sig;
  ending = 1;
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  while (d && readdir(d)) n++;
  if (d) closedir(d);
  return n - 3; /* ., .. and the directory's own */
}

/* The object the program's own malloc slot points at (its address taken
 * through the slot). */
static const char *malloc_from(void) {
  void *(*volatile through_slot)(size_t) = malloc;
  Dl_info info;
  if (!dladdr((void *)through_slot, &info) || !info.dli_fname) return "?";
  const char *slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

int main(int argc, char **argv) {
  int seconds = 4, batches = 1500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seconds")) seconds = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--batches")) batches = atoi(argv[i + 1]);
  }
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &usr2, NULL);
  struct sigaction sa = {.sa_handler = on_usr1};
  sigaction(SIGUSR1, &sa, NULL);
  struct sigaction term = {.sa_handler = on_term};
  sigaction(SIGTERM, &term, NULL);
  wake_fd = eventfd(0, EFD_CLOEXEC);
  if (pipe(pipe_fds) != 0) return 2;
  pthread_t threads[7];
  void *(*fns[6])(void *) = {epoll_forever, epoll_timed, sleeper, waiter, reader, signal_waiter};
  for (int i = 0; i < 6; i++) pthread_create(&threads[i], NULL, fns[i], NULL);
  struct work work = {batches, 0};
  pthread_create(&threads[6], NULL, allocator, &work);
  printf("ready %d\n", getpid());
  fflush(stdout);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev;
  time_t end = time(NULL) + seconds;
  while (time(NULL) < end && !ending) count("epoll_wait(100)", epoll_wait(ep, &ev, 1, 100));
  close(ep);
  pthread_join(threads[6], NULL);
  stop = 1;
  uint64_t one = 1;
  if (write(wake_fd, &one, sizeof one) < 0 || write(pipe_fds[1], "x", 1) < 0) return 2;
  pthread_mutex_lock(&lock);
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < 6; i++) pthread_join(threads[i], NULL);
  raise(SIGUSR1);
  printf("digest %016llx eintr %d errno-changed %d handled %d fds %d malloc-from %s\n",
         (unsigned long long)work.digest, eintr, errno_changed, (int)handled, open_fds(), malloc_from());
  return eintr == 0 && handled == 1 ? 0 : 1;
}
