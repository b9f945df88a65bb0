// A PreloadChannel whose processes are answered on a thread of its own: a
// program that starts waits for its ring only as long as it takes to make
// one, however long the recorder's loop is busy with the kernel's events.
// Its rings are read on the caller's thread; the two take turns under one
// lock. For a recording with BPF, whose rings take the frees only
// (PreloadChannel::Use::FreesOnly).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"
#include "host/preload_channel.h"

namespace allocscope {

class AnsweredChannel {
 public:
  static Result<std::unique_ptr<AnsweredChannel>> open(uint64_t ring_bytes, PreloadChannel::Use use);
  ~AnsweredChannel();  // the thread stops; processes that connect later run without a ring
  AnsweredChannel(const AnsweredChannel&) = delete;
  AnsweredChannel& operator=(const AnsweredChannel&) = delete;

  const std::string& socket_path() const { return channel_.socket_path(); }
  // As PreloadChannel's, under the lock.
  size_t drain(const PreloadChannel::OnRecord& on, size_t max_per_ring = PreloadChannel::kMaxPerPass,
               const PreloadChannel::OnRecord& on_unread = {});
  size_t release_finished(uint64_t now_ms);
  PreloadChannel::Counts counts() const;
  Result<void> adopt_ring(pid_t pid, UniqueFd memfd);

 private:
  explicit AnsweredChannel(PreloadChannel channel) : channel_(std::move(channel)) {}
  void answer();  // the thread: accepts until told to stop

  mutable std::mutex mutex_;
  PreloadChannel channel_;
  UniqueFd stop_;  // an eventfd: written to stop the thread
  std::thread thread_;
};

}  // namespace allocscope
