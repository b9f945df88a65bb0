/* The JVMTI agent's sampled objects whose death allocscope has not been
 * told yet, by tag (tags are handed out in order from 1): a bitmap in
 * chunks made as tags grow, never moved, so that a death (posted on a
 * thread of the JVM's, which must not allocate) clears its bit without a
 * lock. Told exactly once: whoever clears a set bit tells. Hidden. */
#ifndef ALLOCSCOPE_JAVA_TAGS_H
#define ALLOCSCOPE_JAVA_TAGS_H

#include <stdint.h>

#define AS_JAVA_TAG_CHUNK_SHIFT 22 /* 4 Mi tags, 512 KiB, a chunk */
#define AS_JAVA_TAG_CHUNKS 1024    /* 4 Gi tags; past them a sample is not tagged */

/* Tag `tag` is outstanding; 0 when it cannot be (past the chunks, no memory). */
int as_java_tag_mark(uint64_t tag) __attribute__((visibility("hidden")));
/* Whether tag `tag` was outstanding: its bit cleared now. */
int as_java_tag_clear(uint64_t tag) __attribute__((visibility("hidden")));
/* No tag outstanding (sampling ended: the tags were given back with their environment). */
void as_java_tags_forget(void) __attribute__((visibility("hidden")));
/* Each outstanding tag up to `last`, in order, to `each` (with `arg`) in
 * batches of at most `room`; stops early when `each` returns 0. */
void as_java_tags_each(uint64_t last, uint64_t *batch, uint32_t room,
                       int (*each)(const uint64_t *tags, uint32_t n, void *arg), void *arg)
    __attribute__((visibility("hidden")));

#endif
