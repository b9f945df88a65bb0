/* See ring_channel.h. System calls only: no allocation, no stdio. */
#define _GNU_SOURCE
#include "preload/ring_channel.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* The descriptor passed with the one byte allocscope sends; -1 if none. */
static int receive_fd(int sock, int timeout_ms) {
  struct pollfd p = {.fd = sock, .events = POLLIN};
  int n;
  do n = poll(&p, 1, timeout_ms);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  char byte;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
  ssize_t got;
  do got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  while (got < 0 && errno == EINTR);
  struct cmsghdr *c = got == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
    return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

struct as_ring_header *as_channel_map(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= AS_RING_HEADER_BYTES) return NULL;
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return NULL;
  struct as_ring_header *h = (struct as_ring_header *)p;
  uint64_t size = __atomic_load_n(&h->size, __ATOMIC_ACQUIRE);
  if (size == 0 || (size & (size - 1)) || size + AS_RING_HEADER_BYTES != (uint64_t)st.st_size) {
    munmap(p, (size_t)st.st_size);
    return NULL;
  }
  return h;
}

static struct sockaddr_un hello_to; /* sun_path empty: no hello */
static uint32_t hello_said;         /* the process id the last hello said */
static uint32_t hello_tries;

/* The hello socket: the ring socket's neighbour. */
static void set_hello_path(const char *socket_path) {
  const char *slash = strrchr(socket_path, '/');
  size_t dir = slash ? (size_t)(slash - socket_path) + 1 : 0;
  if (dir + sizeof AS_CHANNEL_HELLO_NAME > sizeof hello_to.sun_path) return;
  hello_to.sun_family = AF_UNIX;
  memcpy(hello_to.sun_path, socket_path, dir);
  memcpy(hello_to.sun_path + dir, AS_CHANNEL_HELLO_NAME, sizeof AS_CHANNEL_HELLO_NAME);
}

/* getpid(), kept in a page the kernel wipes in every child that does not
 * share this memory (MADV_WIPEONFORK, Linux 4.14): a child asks again
 * however it was made (fork, or clone() past atfork handlers), and a trial
 * makes no system call for it. (A vfork child shares the page: it says its
 * parent's id, and may not allocate anyway.) */
static uint32_t *pid_page;

static void make_pid_page(void) {
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  if (madvise(p, 4096, MADV_WIPEONFORK) != 0) {
    munmap(p, 4096);
    return;
  }
  pid_page = (uint32_t *)p;
}

static uint32_t current_pid(void) {
  uint32_t pid = pid_page ? __atomic_load_n(pid_page, __ATOMIC_RELAXED) : 0;
  if (pid) return pid;
  pid = (uint32_t)getpid();
  if (pid_page) __atomic_store_n(pid_page, pid, __ATOMIC_RELAXED);
  return pid;
}

/* A socket of its own for each hello: no descriptor is kept that the
 * program could close and reuse for a file of its own. Never waits. */
uint32_t as_channel_pid(const struct as_ring_header *h) {
  uint32_t pid = current_pid();
  if (__atomic_load_n(&hello_said, __ATOMIC_RELAXED) == pid || !hello_to.sun_path[0]) return pid;
  struct as_channel_hello m = {.ring = h->number, .pid = pid};
  int saved = errno; /* an allocation leaves errno as it was */
  int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  bool said = s >= 0 && sendto(s, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&hello_to,
                               sizeof hello_to) == (ssize_t)sizeof m;
  if (s >= 0) close(s);
  if (said || __atomic_add_fetch(&hello_tries, 1, __ATOMIC_RELAXED) >= AS_CHANNEL_HELLO_TRIES) {
    __atomic_store_n(&hello_said, pid, __ATOMIC_RELAXED);
    __atomic_store_n(&hello_tries, 0, __ATOMIC_RELAXED);
  }
  errno = saved;
  return pid;
}

struct as_ring_header *as_channel_connect(const char *socket_path, int timeout_ms) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (!socket_path || !*socket_path || strlen(socket_path) >= sizeof addr.sun_path) return NULL;
  strcpy(addr.sun_path, socket_path);
  set_hello_path(socket_path);
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return NULL;
  struct as_ring_header *h = NULL;
  if (connect(sock, (struct sockaddr *)&addr, sizeof addr) == 0) {
    int fd = receive_fd(sock, timeout_ms);
    if (fd >= 0) {
      h = as_channel_map(fd);
      close(fd);
    }
  }
  close(sock);
  if (h) make_pid_page();
  return h;
}

void as_thread_stack(uint64_t *lo, uint64_t *hi) {
  *lo = *hi = 0;
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return;
  void *base;
  size_t size;
  if (pthread_attr_getstack(&a, &base, &size) == 0) {
    *lo = (uint64_t)(uintptr_t)base;
    *hi = *lo + size;
  }
  pthread_attr_destroy(&a);
}

uint64_t as_stack_end_of(uint64_t sp, uint64_t *lo, uint64_t *hi, uint32_t *depth) {
  if (!*hi) {
    int saved = errno; /* an allocation leaves errno as it was */
    ++*depth;
    as_thread_stack(lo, hi);
    --*depth;
    errno = saved;
    if (!*hi) *hi = 1;
  }
  return sp >= *lo && sp < *hi ? *hi : 0;
}
