/* The JVMTI agent's names for Java methods: each method's class and name,
 * source file and line table, read from the JVM once (a method ID stays
 * valid while its class is loaded; resolved in the sampling thread, before
 * the class can go) and kept for the process's life in a table of bounded
 * size. Callers hold as_java_methods_lock. Hidden. */
#ifndef ALLOCSCOPE_JAVA_METHODS_H
#define ALLOCSCOPE_JAVA_METHODS_H

#include <jvmti.h>
#include <pthread.h>
#include <stdint.h>

#define AS_JAVA_METHOD_SLOTS (1u << 16) /* methods named; past them: one "[unnamed]" frame */

struct as_java_method {
  jmethodID id;
  const char *function, *file; /* "pkg.Class.method", "Class.java" ("" unknown) */
  uint16_t function_len, file_len;
  jint lines; /* line table entries, by start location */
  jvmtiLineNumberEntry *line_table;
};

extern pthread_mutex_t as_java_methods_lock __attribute__((visibility("hidden")));

/* Method `id`'s names, read now if not yet; never NULL (a method that
 * cannot be read, or one past the table's size, is named for that). */
const struct as_java_method *as_java_method(jvmtiEnv *env, JNIEnv *jni, jmethodID id)
    __attribute__((visibility("hidden")));

/* The source line of bytecode index `at` in method m (0: unknown). */
int32_t as_java_line(const struct as_java_method *m, jlocation at) __attribute__((visibility("hidden")));

#endif
