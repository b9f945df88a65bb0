/* A C program embedding CPython through libpython (Py_Initialize), as
 * uWSGI or a game engine does: runs the script named first with the rest
 * as its arguments, so its allocation sites stand under Python frames of a
 * runtime that lives in a library the program links.
 *
 *   embedded_python SCRIPT [ARG...] */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: embedded_python SCRIPT [ARG...]\n");
    return 2;
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.parse_argv = 0; /* the arguments are the script's, not an interpreter's options */
  PyStatus status = PyConfig_SetBytesArgv(&config, argc - 1, argv + 1);
  if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) Py_ExitStatusException(status);
  FILE *script = fopen(argv[1], "r");
  if (!script) {
    perror(argv[1]);
    return 2;
  }
  int failed = PyRun_SimpleFileExFlags(script, argv[1], 1, NULL);
  return Py_FinalizeEx() < 0 || failed ? 1 : 0;
}
