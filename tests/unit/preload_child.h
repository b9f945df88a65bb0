// alloc_sites run with the preload library in exact mode, connecting to a
// PreloadChannel's socket, holding at its end ("done") until SIGUSR1; its
// stdout is a pipe (`out`).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "preload/ring_channel.h"

inline pid_t start_alloc_sites_with_preload(const std::string& socket, int& out) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    setenv("LD_PRELOAD", PRELOAD_LIB, 1);
    setenv("ALLOCSCOPE_RATE", "1", 1);
    setenv(AS_CHANNEL_ENV, socket.c_str(), 1);
    execl(ALLOC_SITES_BIN, ALLOC_SITES_BIN, "--scale-pct", "1", "--threads", "2", "--hold", nullptr);
    _exit(127);
  }
  close(p[1]);
  out = p[0];
  return pid;
}
