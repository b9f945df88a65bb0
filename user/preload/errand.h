/* Work an injection's attach or detach hands to a thread of the library's
 * own: what a runtime in the process (a JVM) must be asked on a thread it
 * knows, or may make wait, which the thread allocscope borrowed must never
 * do. Each kind of errand counts its generations: one
 * acts only while its own is still the latest, so a late one never undoes a
 * newer recording's wish. Hidden. */
#ifndef ALLOCSCOPE_ERRAND_H
#define ALLOCSCOPE_ERRAND_H

#include <stdint.h>

struct as_errands {
  uint64_t generation;                         /* of the latest sent */
  void (*run)(int start, uint64_t generation); /* on the errand's thread */
};

/* A new detached thread running fn(arg): whether one was made. */
int as_start_thread(void *(*fn)(void *), void *arg) __attribute__((visibility("hidden")));
/* run(start, its generation) on a new detached thread; returns at once
 * (nothing is done if no thread can be made). */
void as_errand_send(struct as_errands *kind, int start) __attribute__((visibility("hidden")));
/* Whether `generation` is still the kind's latest. */
int as_errand_latest(struct as_errands *kind, uint64_t generation) __attribute__((visibility("hidden")));

#endif
