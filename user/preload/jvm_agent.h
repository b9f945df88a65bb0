/* The JVMTI agent (jvm_agent.c) in a JVM found running: started when
 * allocscope's injection attaches the library, quieted when it detaches.
 * Hidden. */
#ifndef ALLOCSCOPE_JVM_AGENT_H
#define ALLOCSCOPE_JVM_AGENT_H

/* If the process runs a JVM: its heap sampled from now on (a thread of the
 * library's asks; returns at once). */
void as_jvm_attach_running(void) __attribute__((visibility("hidden")));
/* Its sampling ended, the JVM's interval back to its default (waits up to a
 * second for the JVM). */
void as_jvm_detach_running(void) __attribute__((visibility("hidden")));

#endif
