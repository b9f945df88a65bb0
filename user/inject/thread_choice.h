// Which thread of a process to borrow for an injection, from what /proc
// says of each (its state, the system call it sleeps in): a thread asleep
// in a call the kernel restarts unseen first, a running one next (stopped
// only where it runs the program's own code), one asleep in a call that an
// interruption fails with EINTR (epoll_wait: made again when given back)
// last. Pure, but for reading /proc.
#pragma once

#include <sys/types.h>

#include <string_view>
#include <vector>

namespace allocscope::inject {

struct ThreadState {
  pid_t tid = 0;
  char state = '?';   // R, S, D, T, t, Z, X, ...
  long syscall = -2;  // its /proc syscall file: -2 running, -1 asleep in no system call
};

// The state field of a /proc/PID/task/TID/stat line ('?' if malformed).
char state_from_stat(std::string_view stat);
// The first field of /proc/PID/task/TID/syscall: -2 for "running".
long syscall_from_text(std::string_view text);

// The threads worth trying, best first.
std::vector<pid_t> borrowing_order(std::vector<ThreadState> threads);

// Every thread of process pid, as /proc says now.
std::vector<ThreadState> read_threads(pid_t pid);

}  // namespace allocscope::inject
