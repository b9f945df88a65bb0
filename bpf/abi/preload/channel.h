/* Part of the preload library's wire (bpf/allocscope.h's neighbour): how a
 * process reaches allocscope without BPF (ring_channel.c's side), what
 * allocscope listens on and answers (probe/preload_channel.cpp's). */
#ifndef ALLOCSCOPE_ABI_PRELOAD_CHANNEL_H
#define ALLOCSCOPE_ABI_PRELOAD_CHANNEL_H

#include <stdint.h>

#define AS_CHANNEL_ENV "ALLOCSCOPE_SOCKET"
#define AS_CHANNEL_TIMEOUT_MS 5000 /* a process waits this long for its ring, then runs untraced */
/* A recording with BPF: the ring takes only the frees of sampled blocks,
 * which trap without it. A process waits for it only briefly (allocscope
 * answers on a thread of its own): a stopped allocscope must not hold up
 * every program its command runs. */
#define AS_FREES_CHANNEL_ENV "ALLOCSCOPE_FREES_SOCKET"
#define AS_FREES_CHANNEL_TIMEOUT_MS 50
/* Set (to anything): a launched JVM is not given the library as its JVMTI agent (--no-java-heap). */
#define AS_NO_JAVA_AGENT_ENV "ALLOCSCOPE_NO_JAVA_AGENT"
#define AS_CHANNEL_HELLO_NAME "hello" /* beside the socket: where hellos go */
#define AS_CHANNEL_HELLO_TRIES 16     /* a process that cannot say hello stops trying */

/* A hello: this process's getpid() writes into ring `ring` (its header's number). */
struct as_channel_hello {
  uint64_t ring;
  uint32_t pid;
  uint32_t pad;
};

#endif
