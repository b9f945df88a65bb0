/* A `java` (or javac, jshell: any JDK launcher) run while allocscope
 * records gets the library as its JVMTI agent from the start: the
 * launcher's JLI_Launch (libjli, called by its main through the PLT) is
 * interposed, and "-agentpath:<this library>" goes first among its
 * arguments. JAVA_TOOL_OPTIONS would do the same, but every JVM prints it
 * back on its stderr ("Picked up JAVA_TOOL_OPTIONS"): the target's output
 * must not change. Launchers of JDK tools (javaargs) take JVM options as
 * -J-OPTION. A launcher that execs itself again keeps the argument once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <jni.h>
#include <stdlib.h>
#include <string.h>

#include "abi/preload/channel.h"
#include "preload/sampler.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*jli_launch_fn)(int, char **, int, const char **, int, const char **, const char *, const char *,
                             const char *, const char *, jboolean, jboolean, jboolean, jint);

/* "-agentpath:" or "-J-agentpath:" and this library's path; NULL when unknown. */
static char *agent_option(int tool) {
  Dl_info info;
  if (!dladdr((void *)agent_option, &info) || !info.dli_fname || info.dli_fname[0] != '/') return NULL;
  const char *prefix = tool ? "-J-agentpath:" : "-agentpath:";
  size_t p = strlen(prefix), n = strlen(info.dli_fname);
  char *out = malloc(p + n + 1);
  if (!out) return NULL;
  memcpy(out, prefix, p);
  memcpy(out + p, info.dli_fname, n + 1);
  return out;
}

static int has_argument(int argc, char **argv, const char *arg) {
  for (int i = 0; i < argc; i++)
    if (argv[i] && strcmp(argv[i], arg) == 0) return 1;
  return 0;
}

/* The launcher's arguments with the agent's first (argv[0] kept first);
 * argv itself when the process is not recorded or has the agent already. */
static char **with_agent(int *argc, char **argv, int tool) {
  if (*argc < 1 || !argv || !as_sampler_recorded() || getenv(AS_NO_JAVA_AGENT_ENV)) return argv;
  char *option = agent_option(tool);
  if (!option || has_argument(*argc, argv, option)) {
    free(option);
    return argv;
  }
  char **out = malloc(((size_t)*argc + 2) * sizeof *out); /* the launcher's for its life */
  if (!out) {
    free(option);
    return argv;
  }
  out[0] = argv[0];
  out[1] = option;
  memcpy(out + 2, argv + 1, (size_t)*argc * sizeof *out); /* argv[argc] is NULL */
  ++*argc;
  return out;
}

EXPORT int JLI_Launch(int argc, char **argv, int jargc, const char **jargv, int appclassc,
                      const char **appclassv, const char *fullversion, const char *dotversion,
                      const char *pname, const char *lname, jboolean javaargs, jboolean cpwildcard,
                      jboolean javaw, jint ergo) {
  jli_launch_fn next = (jli_launch_fn)dlsym(RTLD_NEXT, "JLI_Launch");
  if (!next) { /* a program that loaded libjli itself, locally, and found ours first */
    void *jli = dlopen("libjli.so", RTLD_LAZY | RTLD_NOLOAD);
    next = jli ? (jli_launch_fn)dlsym(jli, "JLI_Launch") : NULL;
    if (!next || (void *)next == (void *)JLI_Launch) return 1;
  }
  argv = with_agent(&argc, argv, javaargs);
  return next(argc, argv, jargc, jargv, appclassc, appclassv, fullversion, dotversion, pname, lname, javaargs,
              cpwildcard, javaw, ergo);
}
