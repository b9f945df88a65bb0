#include "target.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "process.h"

namespace allocscope {
namespace {

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

void close_fd(int& fd) {
  if (fd >= 0)
    close(fd);
  fd = -1;
}

[[noreturn]] void exec_child(const std::vector<std::string>& command, int go_fd, int error_fd) {
  char byte;
  if (read(go_fd, &byte, 1) != 1)  // the parent gave up: do not run the command
    _exit(127);
  std::vector<char*> argv;
  for (const std::string& a : command)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  (void)!write(error_fd, &err, sizeof err);
  _exit(127);
}

}  // namespace

Target::Target(Target&& o) noexcept
    : pid_(o.pid_), launched_(o.launched_), pidfd_(o.pidfd_), go_fd_(o.go_fd_), error_fd_(o.error_fd_),
      status_(o.status_) {
  o.pidfd_ = o.go_fd_ = o.error_fd_ = -1;
  o.launched_ = false;
}

Target::~Target() {
  if (launched_ && !status_)
    finish(SIGKILL);
  close_fd(pidfd_);
  close_fd(go_fd_);
  close_fd(error_fd_);
}

Result<Target> Target::attach(pid_t pid) {
  if (pid <= 0)
    return fail("invalid process id " + std::to_string(pid));
  if (pid == getpid())
    return fail("allocscope does not record itself");
  Target t;
  t.pid_ = pid;
  t.pidfd_ = pidfd_open(pid);
  if (t.pidfd_ < 0) {
    if (errno == ESRCH)
      return fail("no such process: " + std::to_string(pid));
    return fail(errno_message("open process " + std::to_string(pid), errno));
  }
  return t;
}

Result<Target> Target::launch(const std::vector<std::string>& command) {
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    return fail(errno_message("pipe", errno));
  pid_t pid = fork();
  if (pid < 0)
    return fail(errno_message("fork", errno));
  if (pid == 0) {
    close(go[1]);
    close(err[0]);
    exec_child(command, go[0], err[1]);
  }
  close(go[0]);
  close(err[1]);
  Target t;
  t.pid_ = pid;
  t.launched_ = true;
  t.go_fd_ = go[1];
  t.error_fd_ = err[0];
  t.pidfd_ = pidfd_open(pid);
  return t;
}

Result<void> Target::start() {
  char byte = 1;
  if (write(go_fd_, &byte, 1) != 1)
    return fail(errno_message("start command", errno));
  close_fd(go_fd_);
  int child_errno = 0;
  ssize_t n = read(error_fd_, &child_errno, sizeof child_errno);  // EOF: exec succeeded
  close_fd(error_fd_);
  if (n == sizeof child_errno) {
    finish(0);
    return fail(errno_message("run command", child_errno));
  }
  return {};
}

bool Target::exited() {
  if (status_)
    return true;
  if (launched_) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_)
      status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    return status_.has_value();
  }
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  return !process_exists(pid_);
}

int Target::finish(int sig) {
  if (!launched_)
    return 0;
  if (!status_) {
    if (sig != 0)
      kill(pid_, sig);
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
  }
  return *status_;
}

}  // namespace allocscope
