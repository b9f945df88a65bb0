/* What the preload library's JVMTI agent (user/preload/jvm_agent.c) writes
 * into the process's ring (shared_ring.h): a Java object the JVM sampled
 * (SampledObjectAlloc, at allocscope's rate), with its Java stack as text,
 * and the object's death (ObjectFree) as the free of a sampled block
 * (as_trial_free) whose address is the object's tag. Tags lie in the upper
 * half of the address space, where no block of the C heap is. Plain C,
 * compiled into the preload library, allocscope and the unit tests. */
#ifndef ALLOCSCOPE_JAVA_RECORD_H
#define ALLOCSCOPE_JAVA_RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AS_TRIAL_JAVA_ALLOC 4        /* struct as_java_alloc, then `bytes` of frames */
#define AS_TRIAL_JAVA_NOTE 5         /* struct as_java_note, then `len` bytes of text */
#define AS_JAVA_TAG_BIT (1ULL << 63) /* an object's tag, as the address of its sample */
#define AS_JAVA_CUT (1u << 31)       /* in `frames`: the stack was deeper */
#define AS_JAVA_MAX_FRAMES 128       /* deeper stacks keep their innermost frames */
#define AS_JAVA_MAX_NAME 1024        /* a frame's function or file, cut there */
/* A record's frames in all; the outer ones past it are left out: a record
 * is at most half a ring, and the smallest ring holds 128 KiB. */
#define AS_JAVA_MAX_FRAME_BYTES (32 * 1024)

/* Its first four fields are as_trial_free's: a reader stopped at it reads its stamp there. */
struct as_java_alloc {
  uint32_t kind; /* AS_TRIAL_JAVA_ALLOC */
  uint32_t tid;
  uint64_t addr;  /* AS_JAVA_TAG_BIT | the object's tag */
  uint64_t ts_ns; /* CLOCK_MONOTONIC, stamped as placed */
  uint64_t size;  /* the object's bytes, as the JVM counts them */
  uint64_t rate;  /* the JVM's sampling interval: mean bytes between samples */
  uint32_t frames,
      bytes; /* frames that follow, innermost first, in `bytes`; AS_JAVA_CUT: outer ones left out */
};

/* Why the agent does not sample this JVM's heap, for allocscope's summary. */
struct as_java_note {
  uint32_t kind; /* AS_TRIAL_JAVA_NOTE */
  uint32_t tid;
  uint64_t addr; /* 0 */
  uint64_t ts_ns;
  uint32_t len, pad;
};

/* A frame: its line (0: unknown), then the lengths and bytes of its
 * function ("pkg.Class.method") and its file ("Class.java"), no NULs. */
struct as_java_frame_head {
  int32_t line;
  uint16_t function_len, file_len;
};

static inline uint32_t as_java_frame_bytes(size_t function_len, size_t file_len) {
  return (uint32_t)(sizeof(struct as_java_frame_head) + function_len + file_len);
}

/* Writes a frame at `to` (as_java_frame_bytes long); returns the byte after it. */
static inline uint8_t *as_java_put_frame(uint8_t *to, int32_t line, const char *function, size_t function_len,
                                         const char *file, size_t file_len) {
  struct as_java_frame_head h = {line, (uint16_t)function_len, (uint16_t)file_len};
  memcpy(to, &h, sizeof h);
  memcpy(to + sizeof h, function, function_len);
  memcpy(to + sizeof h + function_len, file, file_len);
  return to + as_java_frame_bytes(function_len, file_len);
}

/* The frame at `from` of the `left` bytes that remain: its head in *h and
 * the bytes of its names after it; NULL when they do not fit. */
static inline const uint8_t *as_java_get_frame(const uint8_t *from, size_t left,
                                               struct as_java_frame_head *h) {
  if (left < sizeof *h) return NULL;
  memcpy(h, from, sizeof *h);
  if (left - sizeof *h < (size_t)h->function_len + h->file_len) return NULL;
  return from + sizeof *h;
}

#endif
