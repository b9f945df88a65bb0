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

#include <dlfcn.h>
#include <jvmti.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi/preload/java_record.h"
#include "abi/preload/trial_record.h"
#include "preload/java_methods.h"
#include "preload/java_tags.h"
#include "preload/ring_channel.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))
#define AS_JVM_DEFAULT_INTERVAL (512 * 1024) /* HotSpot's own, restored when sampling ends */
#define AS_JVM_QUIET_WAIT_MS 1000
#define AS_JVM_START_WAIT_MS 30000 /* for a JVM entered while it is being made */
#define AS_JVM_DEATH_BATCH 1024    /* tags looked up at once at the JVM's end */

static int started;         /* an environment was asked for (once per process) */
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

/* The calling thread's Java frames, named; returns their encoded bytes. */
static uint32_t name_frames(jvmtiEnv *env, JNIEnv *jni, struct frame_names *out, jint *count) {
  jvmtiFrameInfo frames[AS_JAVA_MAX_FRAMES];
  if ((*env)->GetStackTrace(env, NULL, 0, AS_JAVA_MAX_FRAMES, frames, count) != JVMTI_ERROR_NONE) *count = 0;
  uint32_t bytes = 0;
  pthread_mutex_lock(&as_java_methods_lock);
  for (jint i = 0; i < *count; i++) {
    out[i].method = as_java_method(env, jni, frames[i].method);
    out[i].line = frames[i].location >= 0 ? as_java_line(out[i].method, frames[i].location) : 0;
    uint32_t more = as_java_frame_bytes(out[i].method->function_len, out[i].method->file_len);
    if (bytes + more > AS_JAVA_MAX_FRAME_BYTES) { /* the innermost kept: a record fits the smallest ring */
      *count = i;
      break;
    }
    bytes += more;
  }
  pthread_mutex_unlock(&as_java_methods_lock);
  return bytes;
}

static int write_sample(struct as_ring_header *ring, uint64_t addr, jlong size,
                        const struct frame_names *frames, jint count, uint32_t bytes) {
  uint32_t pid = as_channel_pid(ring);
  struct as_java_alloc *p = (struct as_java_alloc *)as_ring_reserve_stamped(
      ring, (uint32_t)sizeof *p + bytes, pid, true, (uint32_t)offsetof(struct as_java_alloc, ts_ns));
  if (!p) return 0;
  p->kind = AS_TRIAL_JAVA_ALLOC;
  p->tid = as_sampler_tid(pid);
  p->addr = addr;
  p->size = (uint64_t)size;
  p->rate = as_sample_rate;
  p->frames = (uint32_t)count;
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
  uint32_t bytes = name_frames(env, jni, frames, &count);
  struct as_ring_header *ring = as_sampler_ring_begin();
  if (ring && !t->writing) {
    uint64_t tag = __atomic_add_fetch(&last_tag, 1, __ATOMIC_ACQ_REL);
    int tagged = (*env)->SetTag(env, object, (jlong)tag) == JVMTI_ERROR_NONE;
    if (tagged && !as_java_tag_mark(tag)) tagged = (*env)->SetTag(env, object, 0) != JVMTI_ERROR_NONE;
    t->writing = 1;
    int written = write_sample(ring, tagged ? AS_JAVA_TAG_BIT | tag : 0, size, frames, count, bytes);
    t->writing = 0;
    if (tagged && !written && as_java_tag_clear(tag)) (*env)->SetTag(env, object, 0);
  }
  as_sampler_ring_done();
  --t->depth;
}

/* A sampled object's death, told once (java_tags.h). No allocation. */
static void tell_death(uint64_t tag) {
  if (!as_java_tag_clear(tag)) return;
  struct as_ring_header *ring = as_sampler_ring_begin();
  if (ring) {
    uint32_t pid = as_channel_pid(ring);
    struct as_trial_free *p = (struct as_trial_free *)as_ring_reserve_stamped(
        ring, (uint32_t)sizeof *p, pid, true, (uint32_t)offsetof(struct as_trial_free, ts_ns));
    if (p) {
      p->kind = AS_TRIAL_FREE;
      p->tid = as_sampler_tid(pid);
      p->addr = AS_JAVA_TAG_BIT | tag;
      as_ring_commit(p);
    }
  }
  as_sampler_ring_done();
}

/* After a collection, on a thread of the JVM's. */
static void JNICALL object_freed(jvmtiEnv *env, jlong tag) {
  (void)env;
  tell_death((uint64_t)tag);
}

static int by_value(const void *a, const void *b) {
  jlong x = *(const jlong *)a, y = *(const jlong *)b;
  return (x > y) - (x < y);
}

/* Of a batch of outstanding tags, those whose object is gone: told dead. */
static int tell_gone(const uint64_t *tags, uint32_t n, void *env_) {
  jvmtiEnv *env = env_;
  jint live = 0;
  jlong *live_tags = NULL;
  if ((*env)->GetObjectsWithTags(env, (jint)n, (const jlong *)tags, &live, NULL, &live_tags) !=
      JVMTI_ERROR_NONE)
    return 0;
  qsort(live_tags, (size_t)live, sizeof *live_tags, by_value);
  for (uint32_t i = 0; i < n; i++) {
    jlong tag = (jlong)tags[i];
    if (!bsearch(&tag, live_tags, (size_t)live, sizeof *live_tags, by_value)) tell_death(tags[i]);
  }
  (*env)->Deallocate(env, (unsigned char *)live_tags);
  return 1;
}

/* The JVM ends. The deaths its last collection found are posted by a
 * thread of the JVM's a while after the collection, and those still being
 * posted now would be lost (no event after this one): each sampled object
 * not yet told dead is looked up, and told dead when it is gone, so that in
 * use is as of the last collection. */
static void JNICALL vm_death(jvmtiEnv *env, JNIEnv *jni) {
  (void)jni;
  uint64_t batch[AS_JVM_DEATH_BATCH];
  ++as_tls.depth;
  as_java_tags_each(__atomic_load_n(&last_tag, __ATOMIC_ACQUIRE), batch, AS_JVM_DEATH_BATCH, tell_gone, env);
  --as_tls.depth;
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

static void start(JavaVM *vm) {
  if (!as_sampler_recorded() || __atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) return;
  jvmtiEnv *env = NULL;
  if ((*vm)->GetEnv(vm, (void **)&env, JVMTI_VERSION_11) != JNI_OK || !env) {
    say("its JVM has no JVMTI 11 (heap sampling came with Java 11)");
    return;
  }
  const char *why = acquire(env);
  if (!*why) why = enable(env);
  if (*why) {
    say(why);
    (*env)->DisposeEnvironment(env);
    return;
  }
  __atomic_store_n(&agent_env, env, __ATOMIC_RELEASE);
}

/* Sampling ends: the JVM's interval back to its default, the events off,
 * the environment (its capabilities, its tags) given back. On a thread the
 * JVM knows. */
static void stop(void) {
  jvmtiEnv *env = __atomic_exchange_n(&agent_env, NULL, __ATOMIC_ACQ_REL);
  if (env) {
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC, NULL);
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_OBJECT_FREE, NULL);
    (*env)->SetEventNotificationMode(env, JVMTI_DISABLE, JVMTI_EVENT_VM_DEATH, NULL);
    (*env)->SetHeapSamplingInterval(env, AS_JVM_DEFAULT_INTERVAL);
    (*env)->DisposeEnvironment(env);
    as_java_tags_forget();
  }
  __atomic_store_n(&started, 0, __ATOMIC_RELEASE);
}

/* ---- A JVM found running: the library injected --------------------------
 * JVMTI's functions need a thread the JVM knows, which the thread allocscope
 * borrowed may not be (nor may it wait for a safepoint): a thread of the
 * library's own attaches to the JVM for as long as the work takes. */

static pthread_mutex_t lifecycle = PTHREAD_MUTEX_INITIALIZER;
static int quiet_done;

/* The process's JVM once it is made (JNI_GetCreatedJavaVMs names it only
 * then): one entered while it starts (its first native allocations are
 * sampled early) waits for it, `wait_ms` at most. */
static JavaVM *running_vm(int wait_ms) {
  jint (*created)(JavaVM **, jsize, jsize *) =
      (jint(*)(JavaVM **, jsize, jsize *))dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs");
  for (int waited = 0; created; waited += 10) {
    JavaVM *vm = NULL;
    jsize n = 0;
    if (created(&vm, 1, &n) == JNI_OK && n == 1) return vm;
    if (waited >= wait_ms) break;
    struct timespec pause = {0, 10 * 1000000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

static void *in_the_jvm(void *start_it) {
  JavaVM *vm = running_vm(start_it ? AS_JVM_START_WAIT_MS : 0);
  JNIEnv *jni = NULL;
  JavaVMAttachArgs args = {JNI_VERSION_1_6, (char *)"allocscope", NULL};
  pthread_mutex_lock(&lifecycle);
  if (vm && (*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&jni, &args) == JNI_OK) {
    if (start_it)
      start(vm);
    else
      stop();
    (*vm)->DetachCurrentThread(vm);
  } else if (vm && start_it) {
    say("the JVM refused the agent's thread (AttachCurrentThread)");
  }
  pthread_mutex_unlock(&lifecycle);
  if (!start_it) __atomic_store_n(&quiet_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int run_in_the_jvm(int start_it) {
  pthread_attr_t attr;
  pthread_t t;
  if (pthread_attr_init(&attr) != 0) return 0;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int made = pthread_create(&t, &attr, in_the_jvm, start_it ? (void *)1 : NULL) == 0;
  pthread_attr_destroy(&attr);
  return made;
}

void as_jvm_attach_running(void) {
  if (dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs") && !run_in_the_jvm(1))
    say("the agent could not make a thread to reach the JVM");
}

void as_jvm_detach_running(void) {
  if (!__atomic_load_n(&agent_env, __ATOMIC_ACQUIRE)) return;
  __atomic_store_n(&quiet_done, 0, __ATOMIC_RELEASE);
  if (!run_in_the_jvm(0)) return;
  /* Bounded: a JVM in a long safepoint quiets the agent after allocscope has gone. */
  for (int i = 0; i < AS_JVM_QUIET_WAIT_MS && !__atomic_load_n(&quiet_done, __ATOMIC_ACQUIRE); i++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

/* Always JNI_OK: an agent that fails its OnLoad stops the JVM. */
EXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved) {
  (void)options;
  (void)reserved;
  start(vm);
  return JNI_OK;
}

EXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved) {
  return Agent_OnLoad(vm, options, reserved);
}
