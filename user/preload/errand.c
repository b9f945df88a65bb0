/* See errand.h. */
#define _GNU_SOURCE
#include "preload/errand.h"

#include <pthread.h>
#include <stdlib.h>

struct errand {
  struct as_errands *kind;
  uint64_t generation;
  int start;
};

static void *run_errand(void *arg) {
  struct errand e = *(struct errand *)arg;
  free(arg);
  e.kind->run(e.start, e.generation);
  return NULL;
}

int as_start_thread(void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  pthread_t t;
  if (pthread_attr_init(&attr) != 0) return 0;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int made = pthread_create(&t, &attr, fn, arg) == 0;
  pthread_attr_destroy(&attr);
  return made;
}

void as_errand_send(struct as_errands *kind, int start) {
  struct errand *e = malloc(sizeof *e);
  if (!e) return;
  e->kind = kind;
  e->generation = __atomic_add_fetch(&kind->generation, 1, __ATOMIC_ACQ_REL);
  e->start = start;
  if (!as_start_thread(run_errand, e)) free(e);
}

int as_errand_latest(struct as_errands *kind, uint64_t generation) {
  return __atomic_load_n(&kind->generation, __ATOMIC_ACQUIRE) == generation;
}
