/* A JVM found running (the library injected into it) reaches its agent
 * (jvm_agent.c) through a thread of the library's own: JVMTI's functions
 * need a thread the JVM knows, which the thread allocscope borrowed may not
 * be, nor may that thread wait (it may be one the JVM waits for at a
 * safepoint): an errand (errand.h).
 *
 * Before JDK 21, JNI_GetCreatedJavaVMs names a JVM still being made
 * (JDK-8308341), and a thread attached to it then may crash it: a JVM of
 * those versions, or of one unknown, is reached only once its process is
 * AS_JVM_SETTLE_MS old. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <jni.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload/errand.h"
#include "preload/jvm_agent.h"

#define AS_JVM_SETTLE_MS 5000      /* a JVM older than this is made (before JDK 21) */
#define AS_JVM_START_WAIT_MS 30000 /* for a JVM entered while it is being made */

typedef jint (*created_vms_fn)(JavaVM **, jsize, jsize *);

static pthread_mutex_t lifecycle = PTHREAD_MUTEX_INITIALIZER;

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The start of file `path` into text[size], NUL-ended; 0 when unread or empty. */
static int read_text(const char *path, char *text, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, size - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = 0;
  return 1;
}

/* The Java feature release of the JDK that holds libjvm.so (its `release`
 * file, two directories up: JAVA_VERSION="17.0.15"); 0 when unknown. */
static int java_release(created_vms_fn created) {
  Dl_info info;
  if (!dladdr((void *)created, &info) || !info.dli_fname) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s", info.dli_fname);
  for (int up = 0; up < 3; up++) { /* .../lib/server/libjvm.so -> ... */
    char *slash = strrchr(path, '/');
    if (!slash) return 0;
    *slash = 0;
  }
  if (strlen(path) + sizeof "/release" > sizeof path) return 0;
  strcat(path, "/release");
  char text[4096];
  if (!read_text(path, text, sizeof text)) return 0;
  const char *v = strstr(text, "JAVA_VERSION=\"");
  return v ? atoi(v + sizeof "JAVA_VERSION=\"" - 1) : 0;
}

/* How long this process has run, ms (from /proc/self/stat's start time). */
static long process_age_ms(void) {
  char text[1024];
  if (!read_text("/proc/self/stat", text, sizeof text)) return 0;
  const char *at = strrchr(text, ')'); /* the name may hold spaces */
  for (int field = 2; at && field < 22; field++) at = strchr(at + 1, ' ');
  if (!at) return 0;
  unsigned long long started_ticks = strtoull(at + 1, NULL, 10);
  struct timespec now;
  clock_gettime(CLOCK_BOOTTIME, &now);
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (long)(now.tv_sec * 1000 + now.tv_nsec / 1000000) - (long)(started_ticks * 1000 / hz) : 0;
}

/* The process's JVM once it is made, `wait_ms` at most. */
static JavaVM *made_vm(created_vms_fn created, int wait_ms) {
  if (java_release(created) < 21) {
    long age = process_age_ms();
    if (age < AS_JVM_SETTLE_MS) sleep_ms(AS_JVM_SETTLE_MS - age);
  }
  for (int waited = 0;; waited += 10) {
    JavaVM *vm = NULL;
    jsize n = 0;
    if (created(&vm, 1, &n) == JNI_OK && n == 1) return vm;
    if (waited >= wait_ms) return NULL;
    sleep_ms(10);
  }
}

static void in_the_jvm(int start, uint64_t generation);
static struct as_errands jvm_errands = {0, in_the_jvm};

static void in_the_jvm(int start, uint64_t generation) {
  created_vms_fn created = (created_vms_fn)dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs");
  JavaVM *vm = created ? made_vm(created, start ? AS_JVM_START_WAIT_MS : 0) : NULL;
  JNIEnv *jni = NULL;
  JavaVMAttachArgs args = {JNI_VERSION_1_6, (char *)"allocscope", NULL};
  pthread_mutex_lock(&lifecycle);
  if (vm && as_errand_latest(&jvm_errands, generation) &&
      (*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&jni, &args) == JNI_OK) {
    if (start)
      as_jvm_start(vm);
    else
      as_jvm_stop();
    (*vm)->DetachCurrentThread(vm);
  }
  pthread_mutex_unlock(&lifecycle);
}

void as_jvm_attach_running(void) {
  if (dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs")) as_errand_send(&jvm_errands, 1);
}

void as_jvm_detach_running(void) {
  if (dlsym(RTLD_DEFAULT, "JNI_GetCreatedJavaVMs")) as_errand_send(&jvm_errands, 0);
}
