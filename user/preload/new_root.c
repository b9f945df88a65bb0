/* A program that changes its root (chroot ROOT CMD, unshare --root) carries
 * this library's LD_PRELOAD entry into what it runs there. Where the
 * library's path does not resolve in the new root, the loader of the next
 * program would print an error into that program's output ("cannot be
 * preloaded ... ignored"): the tracer must never change a program's
 * output. So after a chroot that succeeded, the entry (and allocscope's
 * variables with it) leaves the environment when the path does not resolve
 * there; the programs run in that root are then probed, as any other the
 * library does not reach. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* LD_PRELOAD's entries are separated by colons or spaces (ld.so(8)). */
static int is_separator(char c) { return c == ':' || c == ' '; }

/* LD_PRELOAD without the entries equal to `self`, into out (of size n). */
static void without_entry(const char *list, const char *self, char *out, size_t n) {
  size_t self_len = strlen(self), used = 0;
  out[0] = 0;
  for (const char *p = list; *p;) {
    while (*p && is_separator(*p)) p++;
    const char *end = p;
    while (*end && !is_separator(*end)) end++;
    size_t len = (size_t)(end - p);
    if (len && !(len == self_len && memcmp(p, self, len) == 0) && used + len + 2 <= n) {
      if (used) out[used++] = ':';
      memcpy(out + used, p, len);
      used += len;
      out[used] = 0;
    }
    p = end;
  }
}

static void leave_environment_if_unreachable(void) {
  Dl_info self;
  const char *list = getenv("LD_PRELOAD");
  if (!list || !dladdr((void *)leave_environment_if_unreachable, &self) || !self.dli_fname) return;
  if (self.dli_fname[0] != '/' || !strstr(list, self.dli_fname)) return;
  if (access(self.dli_fname, R_OK) == 0) return; /* it resolves in the new root too */
  static char rest[4096];
  if (strlen(list) >= sizeof rest) return;
  without_entry(list, self.dli_fname, rest, sizeof rest);
  if (rest[0])
    setenv("LD_PRELOAD", rest, 1);
  else
    unsetenv("LD_PRELOAD");
  unsetenv("ALLOCSCOPE_RATE");
  unsetenv("ALLOCSCOPE_SOCKET");
  unsetenv("ALLOCSCOPE_FREES_SOCKET");
}

EXPORT int chroot(const char *path) {
  static int (*next_chroot)(const char *);
  if (!next_chroot) next_chroot = (int (*)(const char *))dlsym(RTLD_NEXT, "chroot");
  if (!next_chroot) {
    errno = ENOSYS;
    return -1;
  }
  int r = next_chroot(path);
  if (r == 0) {
    int saved = errno;
    leave_environment_if_unreachable();
    errno = saved;
  }
  return r;
}
