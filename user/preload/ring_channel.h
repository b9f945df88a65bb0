/* The preload library's side of a recording without BPF: allocscope listens
 * on a unix socket (ALLOCSCOPE_SOCKET, in a directory only its user can
 * enter) and answers each process that connects with a memfd holding a
 * shared ring of its own (shared_ring.h), its header already set. The
 * process knows allocscope by nothing else; allocscope knows the process
 * by the socket's peer credentials. Forked children write into their
 * parent's ring (the mapping is inherited); a program run by exec
 * connects again. Records carry their writer's getpid(), which inside a
 * PID namespace is not allocscope's name for it: each process says hello
 * before its first record (a datagram to the socket's neighbour "hello":
 * the kernel tells the reader the sender's process id in its own
 * namespace). */
#ifndef ALLOCSCOPE_RING_CHANNEL_H
#define ALLOCSCOPE_RING_CHANNEL_H

#include <stdint.h>

#include "abi/preload/channel.h"
#include "abi/preload/shared_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ring allocscope hands this process, mapped; NULL when there is no
 * socket to reach, no answer within timeout_ms, or an answer that is not a
 * ring. Makes no allocation (it runs in the allocator's constructor). */
struct as_ring_header *as_channel_connect(const char *socket_path, int timeout_ms);

/* The ring in memfd `fd`, mapped, if it is one: a header whose size is a
 * power of two and a file exactly that long; else NULL. */
struct as_ring_header *as_channel_map(int fd);

/* getpid(), for a record in ring h: said hello first if this process has
 * not yet (a forked child has not: the parent's hello is inherited). */
uint32_t as_channel_pid(const struct as_ring_header *h);

/* The calling thread's stack, [*lo, *hi); both 0 when unknown. The main
 * thread's is read from /proc/self/maps by the C library, which allocates:
 * the caller keeps that allocation from being sampled. */
void as_thread_stack(uint64_t *lo, uint64_t *hi);

/* Where the calling thread's stack that holds sp ends, its bounds found
 * once into *lo and *hi (*hi 1: unknown); 0 (copy nothing) when sp is not
 * on it (a signal stack, a coroutine's): a copy must never read past a
 * mapping. *depth is raised meanwhile: the allocations made then are not
 * sampled. */
uint64_t as_stack_end_of(uint64_t sp, uint64_t *lo, uint64_t *hi, uint32_t *depth);

#ifdef __cplusplus
}
#endif

#endif
