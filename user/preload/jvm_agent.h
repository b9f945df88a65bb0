/* The JVMTI agent (jvm_agent.c) and the way it reaches a JVM found running
 * (jvm_attach.c): started when allocscope's injection attaches the library,
 * quieted when it detaches. Hidden. */
#ifndef ALLOCSCOPE_JVM_AGENT_H
#define ALLOCSCOPE_JVM_AGENT_H

#include <jni.h>

/* Sampling the JVM's heap from now on, through an environment of its own;
 * a JVM that cannot is said why (through the ring). On a thread the JVM
 * knows (OnLoad's, or one attached to it). */
void as_jvm_start(JavaVM *vm) __attribute__((visibility("hidden")));
/* Sampling ends: the JVM's interval back to its default, the events off,
 * the environment (its capabilities, its tags) given back. On a thread the
 * JVM knows. */
void as_jvm_stop(void) __attribute__((visibility("hidden")));

/* If the process runs a JVM: its heap sampled from now on (a thread of the
 * library's asks; returns at once). */
void as_jvm_attach_running(void) __attribute__((visibility("hidden")));
/* Its sampling ended (a thread of the library's tells the JVM; returns at
 * once: the thread allocscope borrowed must not wait, the JVM may be
 * waiting for it at a safepoint). */
void as_jvm_detach_running(void) __attribute__((visibility("hidden")));

#endif
