#include "inject/thread_choice.h"

#include <dirent.h>
#include <sys/syscall.h>

#include <algorithm>
#include <charconv>
#include <string>

#include "host/process.h"

namespace allocscope::inject {
namespace {

// Sleeps the kernel restarts unseen when a stop interrupts them
// (-ERESTARTSYS and its kin): the program never knows.
bool restarts_unseen(long nr) {
  switch (nr) {
    case SYS_futex:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_pause:
    case SYS_rt_sigsuspend:
    case SYS_accept:
    case SYS_accept4:
    case SYS_read:
    case SYS_readv:
    case SYS_recvfrom:
    case SYS_recvmsg:
      return true;
    default:
      return false;
  }
}

// Sleeps an interruption fails with EINTR whatever the program's handlers.
bool fails_with_eintr(long nr) {
  switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_epoll_pwait2:
    case SYS_rt_sigtimedwait:
    case SYS_io_getevents:
    case SYS_io_pgetevents:
    case SYS_semop:
    case SYS_semtimedop:
      return true;
    default:
      return false;
  }
}

// Lower is better; -1: not to be borrowed.
int rank(const ThreadState& t) {
  if (t.state == 'R') return 1;
  if (t.state != 'S') return -1;  // D, stopped, traced, zombie: leave alone
  if (t.syscall >= 0 && restarts_unseen(t.syscall)) return 0;
  if (t.syscall >= 0 && fails_with_eintr(t.syscall)) return 3;
  return 2;
}

}  // namespace

char state_from_stat(std::string_view stat) {
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return '?';
  return stat[close + 2];
}

long syscall_from_text(std::string_view text) {
  if (text.starts_with("running")) return -2;
  long nr = -2;
  std::from_chars(text.data(), text.data() + text.size(), nr);
  return nr;
}

std::vector<pid_t> borrowing_order(std::vector<ThreadState> threads) {
  std::stable_sort(threads.begin(), threads.end(),
                   [](const ThreadState& a, const ThreadState& b) { return rank(a) < rank(b); });
  std::vector<pid_t> order;
  for (const auto& t : threads)
    if (rank(t) >= 0) order.push_back(t.tid);
  return order;
}

std::vector<ThreadState> read_threads(pid_t pid) {
  std::vector<ThreadState> threads;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return threads;
  while (dirent* e = readdir(d)) {
    pid_t tid = 0;
    std::string_view name(e->d_name);
    if (std::from_chars(name.data(), name.data() + name.size(), tid).ec != std::errc() || tid <= 0) continue;
    std::string base = dir + "/" + std::string(name);
    auto stat = read_text_file(base + "/stat");
    auto syscall = read_text_file(base + "/syscall");
    if (!stat) continue;
    threads.push_back({tid, state_from_stat(*stat), syscall ? syscall_from_text(*syscall) : -2});
  }
  closedir(d);
  return threads;
}

}  // namespace allocscope::inject
