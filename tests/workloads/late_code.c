/* Code that appears after recording began. Prints "ready" and waits for
 * SIGUSR1; then loads zlib with dlopen and starts a deflate stream (which
 * allocates through zlib's own allocation function), and runs a JIT stub,
 * named "jit_stub" in /tmp/perf-PID.map, that calls malloc; prints "done"
 * and waits for SIGUSR1 to exit. Frame pointers are kept throughout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define JIT_CALLS 10
#define JIT_SIZE 5000

static void wait_usr1(const char *say) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigprocmask(SIG_BLOCK, &set, NULL);
  printf("%s\n", say);
  fflush(stdout);
  int sig;
  sigwait(&set, &sig);
}

/* z_stream is 112 bytes on x86-64; deflateInit_ checks the size it is told. */
static int start_deflate(void) {
  void *z = dlopen("libz.so.1", RTLD_NOW);
  if (!z) return -1;
  int (*init)(void *, int, const char *, int) =
      (int (*)(void *, int, const char *, int))dlsym(z, "deflateInit_");
  const char *(*version)(void) = (const char *(*)(void))dlsym(z, "zlibVersion");
  static unsigned char stream[112];
  memset(stream, 0, sizeof stream);
  return init && version ? init(stream, 6, version(), (int)sizeof stream) : -1;
}

/* push rbp; mov rbp, rsp; movabs rax, malloc; call rax; pop rbp; ret */
static void *(*make_stub(void))(size_t) {
  unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xd0, 0x5d, 0xc3};
  void *target = (void *)malloc;
  memcpy(code + 6, &target, sizeof target);
  unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return NULL;
  memcpy(page, code, sizeof code);
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return NULL;
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fprintf(f, "%lx %zx jit_stub\n", (unsigned long)(uintptr_t)page, sizeof code);
  fclose(f);
  return (void *(*)(size_t))page;
}

int main(void) {
  wait_usr1("ready");
  if (start_deflate() != 0) return 2;
  void *(*stub)(size_t) = make_stub();
  if (!stub) return 3;
  for (int i = 0; i < JIT_CALLS; i++)
    if (!stub(JIT_SIZE)) return 4;
  wait_usr1("done");
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  unlink(path);
  return 0;
}
