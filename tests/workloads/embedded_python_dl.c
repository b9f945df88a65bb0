/* A C program embedding whichever CPython it is given, as a plugin host
 * does: it loads LIBPYTHON with dlopen (no headers, no link: one binary for
 * every version), starts it, and runs SCRIPT as __main__ with the rest as
 * its arguments, so the script's sites stand under Python frames of a
 * runtime the program loaded itself.
 *
 *   embedded_python_dl LIBPYTHON SCRIPT [ARG...] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `s` as a Python string literal at `out` (room for 2 * strlen + 3). */
static char *quoted(char *out, const char *s) {
  *out++ = '\'';
  for (; *s; s++) {
    if (*s == '\\' || *s == '\'') *out++ = '\\';
    *out++ = *s;
  }
  *out++ = '\'';
  *out = 0;
  return out;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: embedded_python_dl LIBPYTHON SCRIPT [ARG...]\n");
    return 2;
  }
  void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL); /* its extension modules need its symbols */
  if (!py) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  void (*initialize)(int) = (void (*)(int))dlsym(py, "Py_InitializeEx");
  int (*run)(const char *, void *) = (int (*)(const char *, void *))dlsym(py, "PyRun_SimpleStringFlags");
  int (*finalize)(void) = (int (*)(void))dlsym(py, "Py_FinalizeEx");
  if (!initialize || !run || !finalize) {
    fprintf(stderr, "%s: not a CPython library\n", argv[1]);
    return 2;
  }
  size_t room = 256;
  for (int i = 2; i < argc; i++) room += 2 * strlen(argv[i]) + 4;
  char *code = malloc(2 * room);
  if (!code) return 2;
  char *at = code + sprintf(code, "import sys\nsys.argv = [");
  for (int i = 2; i < argc; i++) {
    at = quoted(at, argv[i]);
    *at++ = ',';
  }
  at += sprintf(at,
                "]\nexec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'), "
                "{'__name__': '__main__', '__file__': sys.argv[0]})\n");
  initialize(0);
  int failed = run(code, NULL);
  free(code);
  return finalize() < 0 || failed ? 1 : 0;
}
