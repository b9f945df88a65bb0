/* What one probed site costs, by its instruction: a one-byte nop (sdt.h's:
 * a trap on every kernel), a 5-byte nop (rewritten into a call by 6.18,
 * whose forked children then crash there) and a 10-byte nop (rewritten by
 * 7.x, as the preload library's allocscope:* sites). Run by
 * probe_sites.sh with a probe on each; prints ns per call, and whether a
 * forked child ran through each site and exited. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

__asm__(
    ".text\n"
    ".p2align 4\n.globl site_nop1\n.type site_nop1,@function\nsite_nop1:\nnop\nret\n.size "
    "site_nop1,.-site_nop1\n"
    ".p2align 4\n.globl site_nop5\n.type site_nop5,@function\nsite_nop5:\n"
    ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\nret\n.size site_nop5,.-site_nop5\n"
    ".p2align 4\n.globl site_nop10\n.type site_nop10,@function\nsite_nop10:\n"
    ".byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\nret\n.size site_nop10,.-site_nop10\n");
void site_nop1(void);
void site_nop5(void);
void site_nop10(void);

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static void measure(const char *name, void (*site)(void), int calls) {
  site(); /* the first hit is where a kernel rewrites the site */
  double start = now_ns();
  for (int i = 0; i < calls; i++) site();
  double ns = (now_ns() - start) / calls;
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 100; i++) site();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  printf("%-6s %8.0f ns/call  forked child: %s\n", name, ns,
         WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "exited" : "died");
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 100000;
  measure("nop1", site_nop1, calls);
  measure("nop5", site_nop5, calls);
  measure("nop10", site_nop10, calls);
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[512];
  int trampoline = 0;
  while (maps && fgets(line, sizeof line, maps)) trampoline |= strstr(line, "[uprobes-trampoline]") != NULL;
  if (maps) fclose(maps);
  printf("trampoline page: %s\n", trampoline ? "yes" : "no");
  return 0;
}
