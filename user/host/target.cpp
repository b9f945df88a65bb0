#include "host/target.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "host/process.h"

namespace allocscope {
namespace {

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// Only async-signal-safe calls: allocscope may have threads when it forks,
// and an allocation here could wait forever on a lock one held at fork
// (and would be sampled as the command's own).
[[noreturn]] void exec_child(char** argv, char** envp, int go_fd, int error_fd) {
  char byte;
  if (read(go_fd, &byte, 1) != 1)  // the parent gave up: do not run the command
    _exit(127);
  // An ignored signal stays ignored across exec: the command gets the
  // SIGPIPE it would have had without allocscope.
  signal(SIGPIPE, SIG_DFL);
  execvpe(argv[0], argv, envp);
  int err = errno;
  (void)!write(error_fd, &err, sizeof err);
  _exit(127);
}

}  // namespace

std::string exec_failure(const std::string& name, int err) {
  struct stat st;
  bool exists = stat(name.c_str(), &st) == 0;
  if (name.find('/') == std::string::npos && err == ENOENT)
    return "command not found: " + name + " (searched on PATH)" +
           (exists && access(name.c_str(), X_OK) == 0 ? "; did you mean ./" + name + "?" : "");
  if (err == ENOENT)
    return exists ? "cannot run " + name + ": the interpreter its #! line names, or its loader, is missing"
                  : "no such command: " + name;
  if (err == EACCES && exists && S_ISDIR(st.st_mode)) return "cannot run " + name + ": it is a directory";
  if (err == EACCES) return "cannot run " + name + ": not executable (permission denied)";
  return "cannot run " + name + ": " + std::strerror(err);
}

Target::Target(Target&& o) noexcept
    : pid_(o.pid_),
      launched_(std::exchange(o.launched_, false)),  // the moved-from one kills nothing
      pidfd_(std::move(o.pidfd_)),
      go_fd_(std::move(o.go_fd_)),
      error_fd_(std::move(o.error_fd_)),
      status_(o.status_),
      name_(std::move(o.name_)) {}

Target::~Target() {
  if (launched_ && !status_) finish(SIGKILL);
}

Result<Target> Target::attach(pid_t pid) {
  if (pid <= 0) return fail("invalid process id " + std::to_string(pid));
  if (pid == getpid()) return fail("allocscope does not record itself");
  Target t;
  t.pid_ = pid;
  t.pidfd_.reset(pidfd_open(pid));
  if (!t.pidfd_) {
    if (errno == ESRCH) return fail("no such process: " + std::to_string(pid));
    return fail_errno("open process " + std::to_string(pid), errno);
  }
  return t;
}

Result<Target> Target::launch(const std::vector<std::string>& command,
                              const std::optional<std::vector<std::string>>& environment) {
  // Made before fork: the child may only exec.
  std::vector<char*> argv = exec_strings(command);
  std::vector<char*> envp = environment ? exec_strings(*environment) : std::vector<char*>{};
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) != 0) return fail_errno("pipe", errno);
  UniqueFd go_read(go[0]), go_write(go[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return fail_errno("pipe", errno);
  UniqueFd err_read(err[0]), err_write(err[1]);
  pid_t pid = fork();
  if (pid < 0) return fail_errno("fork", errno);
  if (pid == 0) {
    go_write.reset();
    err_read.reset();
    exec_child(argv.data(), environment ? envp.data() : environ, go_read.get(),
               err_write.get());  // never returns
  }
  Target t;
  t.pid_ = pid;
  t.launched_ = true;
  t.name_ = command.empty() ? "" : command.front();
  t.go_fd_ = std::move(go_write);
  t.error_fd_ = std::move(err_read);
  t.pidfd_.reset(pidfd_open(pid));
  return t;
}

Result<void> Target::start() {
  char byte = 1;
  if (write(go_fd_.get(), &byte, 1) != 1) return fail_errno("start command", errno);
  go_fd_.reset();
  int child_errno = 0;
  ssize_t n = read(error_fd_.get(), &child_errno, sizeof child_errno);  // EOF: exec succeeded
  error_fd_.reset();
  if (n == sizeof child_errno) {
    finish(0);
    return fail(exec_failure(name_, child_errno));
  }
  return {};
}

bool Target::exits_within(int ms) {
  for (int waited = 0; waited < ms; waited += 10) {
    if (exited()) return true;
    usleep(10'000);
  }
  return exited();
}

bool Target::exited() {
  if (status_) return true;
  if (launched_) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
    return status_.has_value();
  }
  if (pidfd_) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }
  return !process_exists(pid_);
}

int Target::finish(int sig, const std::function<void()>& still_running) {
  if (!launched_) return 0;
  if (status_) return *status_;
  if (sig != 0) kill(pid_, sig);
  if (still_running && !exits_within(1000)) still_running();
  if (status_) return *status_;  // reaped while it was waited for
  int st = 0;
  while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
  return *status_;
}

}  // namespace allocscope
