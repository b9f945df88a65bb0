/* The JVMTI agent inside a JVM that allocscope records: the JVM samples its
 * own heap (SampledObjectAlloc, at allocscope's rate: the same Poisson byte
 * sampling as allocscope's countdown, and nearly free for an allocation not
 * sampled), and each sample goes into the process's ring with its Java
 * stack (java_record.h). Each sampled object is tagged, and its death
 * (ObjectFree, after the collection that found it dead) goes as the free of
 * that tag. The library is the agent itself: a launched `java` is given
 * -agentpath naming it (java_launch.c), and the JVM's dlopen of it finds it
 * loaded already. A JVM found running gets it when the library is injected
 * (as_jvm_attach_running). The agent never fails the JVM: whatever it cannot do, it
 * leaves undone, and says why through the ring. */
#define _GNU_SOURCE
#include "preload/jvm_agent.h"

#include <jvmti.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi/preload/java_record.h"
#include "abi/preload/trial_record.h"
#include "preload/java_methods.h"
#include "preload/ring_channel.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))
#define AS_JVM_DEATHS_QUIET_NS (5 * 1000000L)  /* at the JVM's end: deaths posted this recently... */
#define AS_JVM_DEATHS_WAIT_NS (200 * 1000000L) /* ...are waited for, this long at most */

static int started;         /* an environment was asked for (and not given back) */
static jvmtiEnv *agent_env; /* sampling through it */
static uint64_t last_tag;

/* A note for allocscope's summary: why the Java heap is not read. */
static void say(const char *why) {
  struct as_ring_header *ring = as_sampler_ring_begin();
  if (ring) {
    size_t n = strnlen(why, 256);
    uint32_t pid = as_channel_pid(ring);
    struct as_java_note *p = (struct as_java_note *)as_ring_reserve_stamped(
        ring, (uint32_t)(sizeof *p + n), pid, true, (uint32_t)offsetof(struct as_java_note, ts_ns));
    if (p) {
      p->kind = AS_TRIAL_JAVA_NOTE;
      p->tid = as_sampler_tid(pid);
      p->addr = 0;
      p->len = (uint32_t)n;
      memcpy(p + 1, why, n);
      as_ring_commit(p);
    }
  }
  as_sampler_ring_done();
}

struct frame_names {
  const struct as_java_method *method;
  int32_t line;
};

/* The calling thread's Java frames, named; returns their encoded bytes,
 * *cut when outer ones were left out. */
static uint32_t name_frames(jvmtiEnv *env, JNIEnv *jni, struct frame_names *out, jint *count, int *cut) {
  jvmtiFrameInfo frames[AS_JAVA_MAX_FRAMES];
  if ((*env)->GetStackTrace(env, NULL, 0, AS_JAVA_MAX_FRAMES, frames, count) != JVMTI_ERROR_NONE) *count = 0;
  jint depth = 0;
  *cut = *count == AS_JAVA_MAX_FRAMES && (*env)->GetFrameCount(env, NULL, &depth) == JVMTI_ERROR_NONE &&
         depth > AS_JAVA_MAX_FRAMES;
  uint32_t bytes = 0;
  pthread_mutex_lock(&as_java_methods_lock);
  for (jint i = 0; i < *count; i++) {
    out[i].method = as_java_method(env, jni, frames[i].method);
    out[i].line = frames[i].location >= 0 ? as_java_line(out[i].method, frames[i].location) : 0;
    uint32_t more = as_java_frame_bytes(out[i].method->function_len, out[i].method->file_len);
    if (bytes + more > AS_JAVA_MAX_FRAME_BYTES) { /* the innermost kept: a record fits the smallest ring */
      *count = i;
      *cut = 1;
      break;
    }
    bytes += more;
  }
  pthread_mutex_unlock(&as_java_methods_lock);
  return bytes;
}

static int write_sample(struct as_ring_header *ring, uint64_t addr, jlong size,
                        const struct frame_names *frames, jint count, uint32_t bytes, int cut) {
  uint32_t pid = as_channel_pid(ring);
  struct as_java_alloc *p = (struct as_java_alloc *)as_ring_reserve_stamped(
      ring, (uint32_t)sizeof *p + bytes, pid, true, (uint32_t)offsetof(struct as_java_alloc, ts_ns));
  if (!p) return 0;
  p->kind = AS_TRIAL_JAVA_ALLOC;
  p->tid = as_sampler_tid(pid);
  p->addr = addr;
  p->size = (uint64_t)size;
  p->rate = as_sample_rate;
  p->frames = (uint32_t)count | (cut ? AS_JAVA_CUT : 0);
  p->bytes = bytes;
  uint8_t *at = (uint8_t *)(p + 1);
  for (jint i = 0; i < count; i++) {
    const struct as_java_method *m = frames[i].method;
    at = as_java_put_frame(at, frames[i].line, m->function, m->function_len, m->file, m->file_len);
  }
  as_ring_commit(p);
  return 1;
}

/* On the allocating thread, the object held alive meanwhile. */
static void JNICALL sampled_object(jvmtiEnv *env, JNIEnv *jni, jthread thread, jobject object, jclass klass,
                                   jlong size) {
  (void)thread;
  (void)klass;
  struct thread_sampler *t = &as_tls;
  ++t->depth; /* what naming allocates is the agent's, not the program's */
  struct frame_names frames[AS_JAVA_MAX_FRAMES];
  jint count = 0;
  int cut = 0;
  uint32_t bytes = name_frames(env, jni, frames, &count, &cut);
  struct as_ring_header *ring = as_sampler_ring_begin();
  if (ring && !t->writing) {
    jlong tag = (jlong)__atomic_add_fetch(&last_tag, 1, __ATOMIC_RELAXED);
    int tagged = (*env)->SetTag(env, object, tag) == JVMTI_ERROR_NONE;
    t->writing = 1;
    int written =
        write_sample(ring, tagged ? AS_JAVA_TAG_BIT | (uint64_t)tag : 0, size, frames, count, bytes, cut);
    t->writing = 0;
    if (tagged && !written) (*env)->SetTag(env, object, 0); /* its death would be told of nothing */
  }
  as_sampler_ring_done();
  --t->depth;
}

static long last_death_ns; /* when the JVM last posted a death */

/* After a collection, on a thread of the JVM's (before JDK 16, inside the
 * collection's pause): no allocation, and no waiting for room. */
static void JNICALL object_freed(jvmtiEnv *env, jlong tag) {
  (void)env;
  __atomic_store_n(&last_death_ns, as_ring_now_ns(), __ATOMIC_RELAXED);
  struct as_ring_header *ring = as_sampler_ring_begin();
  if (ring) {
    uint32_t pid = as_channel_pid(ring);
    struct as_trial_free *p = (struct as_trial_free *)as_ring_reserve_stamped(
        ring, (uint32_t)sizeof *p, pid, false, (uint32_t)offsetof(struct as_trial_free, ts_ns));
    if (p) {
      p->kind = AS_TRIAL_FREE;
      p->tid = as_sampler_tid(pid);
      p->addr = AS_JAVA_TAG_BIT | (uint64_t)tag;
      as_ring_commit(p);
    }
  }
  as_sampler_ring_done();
}

/* The JVM ends. The deaths its last collection found are posted by a thread
 * of the JVM's a while after the collection, and none is posted after this
 * event: those pending are posted now (a tag map's lookup posts them), and
 * those being posted are waited for until the posting pauses (bounded), so
 * that in use is as of the last collection. */
static void JNICALL vm_death(jvmtiEnv *env, JNIEnv *jni) {
  (void)jni;
  jlong none = -1; /* no object has it: only the posting is wanted */
  jint count = 0;
  ++as_tls.depth;
  (*env)->GetObjectsWithTags(env, 1, &none, &count, NULL, NULL);
  --as_tls.depth;
  long until = as_ring_now_ns() + AS_JVM_DEATHS_WAIT_NS;
  while (as_ring_now_ns() < until &&
         as_ring_now_ns() - __atomic_load_n(&last_death_ns, __ATOMIC_RELAXED) < AS_JVM_DEATHS_QUIET_NS) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

static jint sampling_interval(void) {
  if (as_sample_rate <= 1) return 0; /* every allocation */
  return as_sample_rate > INT_MAX ? INT_MAX : (jint)as_sample_rate;
}

/* Sampling through `env`, which holds the capabilities: "" or why not. */
static const char *enable(jvmtiEnv *env) {
  jvmtiEventCallbacks callbacks;
  memset(&callbacks, 0, sizeof callbacks);
  callbacks.SampledObjectAlloc = sampled_object;
  callbacks.ObjectFree = object_freed;
  callbacks.VMDeath = vm_death;
  if ((*env)->SetEventCallbacks(env, &callbacks, (jint)sizeof callbacks) != JVMTI_ERROR_NONE)
    return "its JVMTI refused the agent's callbacks";
  if ((*env)->SetHeapSamplingInterval(env, sampling_interval()) != JVMTI_ERROR_NONE)
    return "its JVMTI refused the sampling interval";
  if ((*env)->SetEventNotificationMode(env, JVMTI_ENABLE, JVMTI_EVENT_OBJECT_FREE, NULL) !=
          JVMTI_ERROR_NONE ||
      (*env)->SetEventNotificationMode(env, JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL) !=
          JVMTI_ERROR_NONE ||
      (*env)->SetEventNotificationMode(env, JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH, NULL) != JVMTI_ERROR_NONE)
    return "its JVMTI refused the sampling events";
  return "";
}

/* The capabilities, or why not. can_generate_sampled_object_alloc_events
 * is held by one environment at a time: another profiler may have it. */
static const char *acquire(jvmtiEnv *env) {
  jvmtiCapabilities caps;
  memset(&caps, 0, sizeof caps);
  caps.can_generate_sampled_object_alloc_events = 1;
  caps.can_tag_objects = 1;
  caps.can_generate_object_free_events = 1;
  caps.can_get_line_numbers = 1;
  caps.can_get_source_file_name = 1;
  if ((*env)->AddCapabilities(env, &caps) == JVMTI_ERROR_NONE) return "";
  jvmtiCapabilities potential;
  memset(&potential, 0, sizeof potential);
  if ((*env)->GetPotentialCapabilities(env, &potential) == JVMTI_ERROR_NONE &&
      !potential.can_generate_sampled_object_alloc_events)
    return "another JVMTI agent (a profiler?) samples its heap: the JVM lets one do so at a time";
  return "its JVMTI refused the capabilities the agent needs";
}

void as_jvm_start(JavaVM *vm) {
  if (!as_sampler_recorded() || __atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) return;
  if (as_sample_rate > INT_MAX) { /* the JVM's interval is an int */
    say("--rate is above the JVM's largest sampling interval (2 GiB)");
    __atomic_store_n(&started, 0, __ATOMIC_RELEASE);
    return;
  }
  jvmtiEnv *env = NULL;
  if ((*vm)->GetEnv(vm, (void **)&env, JVMTI_VERSION_11) != JNI_OK || !env) {
    say("its JVM has no JVMTI 11 (heap sampling came with Java 11)");
    __atomic_store_n(&started, 0, __ATOMIC_RELEASE);
    return;
  }
  const char *why = acquire(env);
  if (!*why) why = enable(env);
  if (*why) {
    say(why);
    (*env)->DisposeEnvironment(env);
    __atomic_store_n(&started, 0, __ATOMIC_RELEASE); /* a later recording tries again */
    return;
  }
  __atomic_store_n(&agent_env, env, __ATOMIC_RELEASE);
}

void as_jvm_stop(void) {
  jvmtiEnv *env = __atomic_exchange_n(&agent_env, NULL, __ATOMIC_ACQ_REL);
  if (env) {
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_OBJECT_FREE, NULL);
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_VM_DEATH, NULL);
    (*env)->SetHeapSamplingInterval(env, AS_DEFAULT_RATE); /* HotSpot's own default too */
    (*env)->DisposeEnvironment(env);
  }
  __atomic_store_n(&started, 0, __ATOMIC_RELEASE);
}

/* Always JNI_OK: an agent that fails its OnLoad stops the JVM. */
EXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
  (void)options;
  (void)reserved;
  as_jvm_start(vm);
  return JNI_OK;
}

EXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved) {
  return Agent_OnLoad(vm, options, reserved);
}
