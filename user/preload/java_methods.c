/* See java_methods.h. */
#include "preload/java_methods.h"

#include <stdlib.h>
#include <string.h>

#include "abi/preload/java_record.h"

pthread_mutex_t as_java_methods_lock = PTHREAD_MUTEX_INITIALIZER;

static struct as_java_method **slots; /* open addressing by id; made at the first sample */
static uint32_t used;
static const struct as_java_method unreadable = {NULL, "[unreadable Java method]", "", 24, 0, 0, NULL};
static const struct as_java_method past_table = {NULL, "[Java methods past allocscope's table]", "", 38, 0, 0,
                                                 NULL};

static uint32_t slot_of(jmethodID id) {
  uint64_t h = (uint64_t)(uintptr_t)id * 0x9E3779B97F4A7C15ULL;
  return (uint32_t)(h >> 40) & (AS_JAVA_METHOD_SLOTS - 1);
}

/* "Lpkg/Outer$Inner;" as "pkg.Outer$Inner", then ".method": a string of its own. */
static char *function_name(const char *signature, const char *method, uint16_t *len) {
  size_t s = strlen(signature), m = strlen(method);
  if (s >= 2 && signature[0] == 'L' && signature[s - 1] == ';') {
    signature++;
    s -= 2;
  }
  if (s + 1 + m > AS_JAVA_MAX_NAME) m = s + 1 < AS_JAVA_MAX_NAME ? AS_JAVA_MAX_NAME - s - 1 : 0;
  if (s + 1 + m > AS_JAVA_MAX_NAME) s = AS_JAVA_MAX_NAME - 1;
  char *out = malloc(s + 1 + m + 1);
  if (!out) return NULL;
  for (size_t i = 0; i < s; i++) out[i] = signature[i] == '/' ? '.' : signature[i];
  out[s] = '.';
  memcpy(out + s + 1, method, m);
  out[s + 1 + m] = 0;
  *len = (uint16_t)(s + 1 + m);
  return out;
}

static char *copy_name(const char *name, uint16_t *len) {
  size_t n = name ? strnlen(name, AS_JAVA_MAX_NAME) : 0;
  char *out = malloc(n + 1);
  if (!out) return NULL;
  if (n) memcpy(out, name, n);
  out[n] = 0;
  *len = (uint16_t)n;
  return out;
}

static struct as_java_method *read_method(jvmtiEnv *env, JNIEnv *jni, jmethodID id) {
  jclass klass = NULL;
  char *signature = NULL, *name = NULL, *file = NULL;
  struct as_java_method *m = NULL;
  if ((*env)->GetMethodDeclaringClass(env, id, &klass) != JVMTI_ERROR_NONE ||
      (*env)->GetClassSignature(env, klass, &signature, NULL) != JVMTI_ERROR_NONE ||
      (*env)->GetMethodName(env, id, &name, NULL, NULL) != JVMTI_ERROR_NONE)
    goto done;
  if ((*env)->GetSourceFileName(env, klass, &file) != JVMTI_ERROR_NONE) file = NULL;
  m = calloc(1, sizeof *m);
  if (!m) goto done;
  m->id = id;
  m->function = function_name(signature, name, &m->function_len);
  m->file = copy_name(file, &m->file_len);
  jint n = 0;
  jvmtiLineNumberEntry *table = NULL;
  if ((*env)->GetLineNumberTable(env, id, &n, &table) == JVMTI_ERROR_NONE && n > 0) {
    m->line_table = malloc((size_t)n * sizeof *table);
    if (m->line_table) {
      memcpy(m->line_table, table, (size_t)n * sizeof *table);
      m->lines = n;
    }
  }
  if (table) (*env)->Deallocate(env, (unsigned char *)table);
  if (!m->function || !m->file) {
    free((void *)m->function);
    free((void *)m->file);
    free(m->line_table);
    free(m);
    m = NULL;
  }
done:
  if (signature) (*env)->Deallocate(env, (unsigned char *)signature);
  if (name) (*env)->Deallocate(env, (unsigned char *)name);
  if (file) (*env)->Deallocate(env, (unsigned char *)file);
  if (klass && jni) (*jni)->DeleteLocalRef(jni, klass);
  return m;
}

const struct as_java_method *as_java_method(jvmtiEnv *env, JNIEnv *jni, jmethodID id) {
  if (!slots && !(slots = calloc(AS_JAVA_METHOD_SLOTS, sizeof *slots))) return &unreadable;
  uint32_t i = slot_of(id);
  for (; slots[i]; i = (i + 1) & (AS_JAVA_METHOD_SLOTS - 1))
    if (slots[i]->id == id) return slots[i];
  if (used >= AS_JAVA_METHOD_SLOTS / 2) return &past_table; /* probes stay short */
  struct as_java_method *m = read_method(env, jni, id);
  if (!m) return &unreadable;
  slots[i] = m;
  used++;
  return m;
}

int32_t as_java_line(const struct as_java_method *m, jlocation at) {
  int32_t line = 0;
  jlocation best = -1;
  for (jint i = 0; i < m->lines; i++) /* the entry that begins last at or before `at` */
    if (m->line_table[i].start_location <= at && m->line_table[i].start_location > best) {
      best = m->line_table[i].start_location;
      line = m->line_table[i].line_number;
    }
  return line;
}
