// The process being recorded: one attached with -p, or one launched with
// -- CMD and held before exec until its probes are in place.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace allocscope {

class Target {
 public:
  static Result<Target> attach(pid_t pid);
  // Forks a child that waits, before exec, for start(); it runs with
  // `environment` (NAME=VALUE entries) when one is given.
  static Result<Target> launch(const std::vector<std::string>& command,
                               const std::optional<std::vector<std::string>>& environment = std::nullopt);
  Target(Target&&) noexcept;
  Target& operator=(Target&&) = delete;
  ~Target();

  pid_t pid() const { return pid_; }
  bool launched() const { return launched_; }
  // Lets a launched child exec its command; fails if exec fails.
  Result<void> start();
  // Whether the process has exited (a launched child is reaped).
  bool exited();
  // Whether it has exited, or does within `ms` milliseconds.
  bool exits_within(int ms);
  // Readable once the process has exited; -1 when the kernel has no pidfds.
  int exit_fd() const { return pidfd_.get(); }
  // Sends `sig` to a launched child that still runs, waits for it and returns
  // the shell-style status (128 + signal when killed). `still_running` is
  // called once if it has not exited a second later (an interactive program
  // goes on after SIGINT), before the wait goes on.
  int finish(int sig, const std::function<void()>& still_running = {});

 private:
  Target() = default;
  pid_t pid_ = -1;
  bool launched_ = false;
  UniqueFd pidfd_;
  UniqueFd go_fd_;     // write end: releases the child
  UniqueFd error_fd_;  // read end: the child's exec errno, or EOF on success
  std::optional<int> status_;
  std::string name_;  // the command as given, for what exec said
};

// Why exec of `name` failed with `err`, in words that name the command:
// searched on PATH when it has no '/' (and ./NAME suggested where that
// would run), or what keeps the file from running.
std::string exec_failure(const std::string& name, int err);

}  // namespace allocscope
