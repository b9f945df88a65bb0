/* A workload confined the way container runtimes confine programs: a
 * seccomp allow-list in the shape of Docker's default profile (anything not
 * listed fails with EPERM), installed before it allocates. The tracer must
 * not need a system call from it (a return probe's trampoline on some
 * kernels does).
 *
 *   seccomp_sites [--no-filter] [--sleep SECONDS] [--entry]
 *
 * --sleep: confined, print "ready" and sleep that long before the calls
 * (for a tracer to attach to the running process).
 *
 * Makes kCalls calls of each entry point and prints a checksum of what it
 * read back: traced and untraced runs print the same. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { kCalls = 20000, kSize = 1000 };

/* --entry: the calls loading allocscope's library into the running
 * process needs besides, allowed too (a service's filter that allows
 * them, as systemd's @system-service does). */
static int confine(int entry) {
  static const int allowed[] = {
      SCMP_SYS(read),           SCMP_SYS(write),         SCMP_SYS(brk),
      SCMP_SYS(mmap),           SCMP_SYS(munmap),        SCMP_SYS(mremap),
      SCMP_SYS(mprotect),       SCMP_SYS(madvise),       SCMP_SYS(futex),
      SCMP_SYS(exit),           SCMP_SYS(exit_group),    SCMP_SYS(rt_sigreturn),
      SCMP_SYS(rt_sigprocmask), SCMP_SYS(newfstatat),    SCMP_SYS(fstat),
      SCMP_SYS(getrandom),      SCMP_SYS(clock_gettime), SCMP_SYS(getpid),
      SCMP_SYS(gettid),         SCMP_SYS(close),         SCMP_SYS(clock_nanosleep),
      SCMP_SYS(nanosleep),
  };
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (!ctx) return -1;
  static const int entering[] = {SCMP_SYS(memfd_create), SCMP_SYS(openat), SCMP_SYS(pread64),
                                 SCMP_SYS(sched_yield)};
  for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; ++i)
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0) != 0) return -1;
  for (size_t i = 0; entry && i < sizeof entering / sizeof entering[0]; ++i)
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, entering[i], 0) != 0) return -1;
  int rc = seccomp_load(ctx);
  seccomp_release(ctx);
  return rc;
}

__attribute__((noinline)) static uint64_t churn(void) {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < kCalls; ++i) {
    unsigned char *a = malloc(kSize), *b = calloc(1, kSize), *c = malloc(kSize / 2);
    void *d = NULL;
    if (!a || !b || !c || posix_memalign(&d, 64, kSize) != 0) abort();
    c = realloc(c, kSize);
    if (!c) abort();
    memset(a, (int)(i & 0xff), kSize);
    memcpy(c, a, kSize);
    sum += a[i % kSize] + b[i % kSize] + c[(i * 7) % kSize] + ((uintptr_t)d & 63);
    free(a);
    free(b);
    free(c);
    free(d);
  }
  return sum;
}

int main(int argc, char **argv) {
  int filter = 1, sleep_s = 0, entry = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--no-filter") == 0) filter = 0;
    if (strcmp(argv[i], "--entry") == 0) entry = 1;
    if (strcmp(argv[i], "--sleep") == 0 && i + 1 < argc) sleep_s = atoi(argv[++i]);
  }
  if (filter && confine(entry) != 0) {
    fprintf(stderr, "seccomp_sites: cannot install the filter\n");
    return 2;
  }
  /* A call the list refuses: the filter is in force. */
  errno = 0;
  int refused = syscall(SYS_getppid) == -1 && errno == EPERM;
  if (sleep_s) {
    printf("ready\n");
    fflush(stdout);
    struct timespec t = {sleep_s, 0};
    nanosleep(&t, NULL);
  }
  printf("filter %s, checksum %llu\n", refused ? "on" : "off", (unsigned long long)churn());
  return 0;
}
