// allocscope's side of a recording without BPF (user/preload/ring_channel.h):
// a unix socket in a directory of its own (mode 0700: only this user can
// reach it) that answers each traced process with a ring in a memfd, and
// the reader of those rings. The way in that BpfSession's ring buffer is
// when the kernel runs the probes. Records name their writer by its
// getpid(); a hello datagram (its neighbour socket) tells the kernel's
// name for it in allocscope's PID namespace, which is what `drain` hands on.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mapped_memory.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace allocscope {

class PreloadChannel {
 public:
  static constexpr size_t kMaxRings = 1024;  // processes that connect beyond it run untraced (counted)
  // Bytes of the rings in use at once; past them a process gets a small ring (counted).
  static constexpr uint64_t kMaxRingBytes = uint64_t(1) << 30, kSmallRingBytes = 128 << 10;

  // What the rings carry. FreesOnly: a recording with BPF, whose probes
  // take the trials; only the frees of sampled blocks come through a ring
  // (their records' clock must be the kernel's: a process in a time
  // namespace of its own gets no ring, and its frees trap).
  enum class Use { TrialsAndFrees, FreesOnly };

  // Listens in a new private directory under `parent` ($XDG_RUNTIME_DIR or
  // /tmp when empty); each ring holds ring_bytes (a power of two) of records.
  static Result<PreloadChannel> open(uint64_t ring_bytes, Use use = Use::TrialsAndFrees,
                                     const std::string& parent = "");
  PreloadChannel(PreloadChannel&&) noexcept = default;
  PreloadChannel& operator=(PreloadChannel&&) = delete;

  // For ALLOCSCOPE_SOCKET in the traced command's environment.
  const std::string& socket_path() const { return socket_.path; }
  // Readable when a process is waiting for its ring.
  int fd() const { return listen_.get(); }

  // A ring: the process it was made for, and its number (each ring made
  // has a higher one). Processes that process forks write into it too.
  struct RingId {
    pid_t owner = 0;
    uint64_t number = 0;
  };
  // Answers every process waiting to connect; returns how many got a ring.
  // `before_answer` runs for each while it still waits for the answer (its
  // program is loaded, not yet run: its mappings are worth reading then).
  size_t accept_waiting(const std::function<void(const RingId&)>& before_answer = {});

  // A ring made in `memfd`, a process's own that allocscope opened (a
  // library allocscope loaded into a running process maps it), for
  // process `pid`, which says no hello: its own id for itself is read now.
  Result<void> adopt_ring(pid_t pid, UniqueFd memfd);

  // Hands each committed record of every ring to `on` (its ring, the
  // writer's process id here and the payload), each ring in its order;
  // returns how many. A record whose writer died before committing it is
  // passed over, and a lock whose holder died is broken (both counted). So
  // is a record of a process in a PID namespace of its own that said no
  // hello (no telling which process it is).
  using OnRecord = std::function<void(const RingId& ring, uint32_t tgid, std::span<const uint8_t> payload)>;
  // At most max_per_ring records of each ring a call (then drained_all()
  // is false): one busy writer must not starve the others, nor processes
  // waiting for a ring. Writers waiting for room are told the reader reads.
  static constexpr size_t kMaxPerPass = 16384;
  // on_unread: for each ring read short of its end, the record it stopped
  // at (committed, or as much of it as its writer wrote), tgid 0.
  size_t drain(const OnRecord& on, size_t max_per_ring = kMaxPerPass, const OnRecord& on_unread = {});
  // Whether the last drain read every ring to its end (none stopped at a
  // record its live writer has not finished).
  bool drained_all() const { return drained_all_; }

  // Unmaps the rings no process can write any more (read to their end; the
  // process they were made for, and every process seen writing into them
  // or forked from it, gone); returns how many. At most once a second.
  size_t release_finished(uint64_t now_ms);

  struct Counts {
    uint64_t rings = 0, refused = 0;    // rings in use; processes beyond kMaxRings or unanswerable
    uint64_t other_clock = 0;           // FreesOnly: processes in a time namespace of their own
    uint64_t small = 0;                 // rings made small: kMaxRingBytes in use
    uint64_t released = 0;              // rings released (their processes gone)
    uint64_t records = 0;               // records read
    uint64_t lost = 0, lost_bytes = 0;  // records the writers could not place (ring full, lock taken)
    uint64_t abandoned = 0;             // records their writer died in
    uint64_t broken_locks = 0;          // reservation locks their holder died with
    uint64_t corrupt = 0;               // rings written past their bounds: no more read of them
    uint64_t hellos = 0;                // processes that said which they are
    uint64_t namespaced = 0;            // of them, in a PID namespace of their own
    uint64_t unplaced = 0;              // records of such processes that said no hello: dropped
  };
  Counts counts() const;

 private:
  struct Ring {
    RingId id;
    MappedMemory memory;
    std::vector<uint32_t> writers{};  // processes seen in it besides its owner (the dead pruned)
    std::unordered_map<uint32_t, uint32_t> pid_here{};  // by getpid(), from the hellos
    bool namespaced = false;                            // a writer's getpid() is not its id here
    bool corrupt = false;
  };
  static constexpr size_t kMaxHellos = 4096;  // names remembered per ring; forgotten all at once beyond
  bool writer_gone(uint32_t tgid, const Ring& r) const;
  // The id here of the process whose getpid() is `pid`; 0 when unknown.
  uint32_t writer_here(Ring& r, uint32_t pid);
  void read_hellos();
  void tell_unread(Ring& r, const OnRecord& on_unread);
  PreloadChannel() = default;
  uint64_t next_ring_bytes() const;
  Result<Ring> make_ring(pid_t pid, uint64_t number, UniqueFd& fd) const;

  // The socket and its directory, removed when their owner goes.
  struct SocketPath {
    std::string dir, path, hello;
    SocketPath() = default;
    SocketPath(SocketPath&& o) noexcept
        : dir(std::exchange(o.dir, {})), path(std::exchange(o.path, {})), hello(std::exchange(o.hello, {})) {}
    ~SocketPath();
  };

  SocketPath socket_;
  uint64_t ring_bytes_ = 0;
  Use use_ = Use::TrialsAndFrees;
  UniqueFd listen_, hello_;
  std::vector<Ring> rings_;
  std::unordered_map<uint32_t, uint64_t> newest_ring_;  // by process: the number of the last ring it got
  Counts counts_;
  uint64_t rings_made_ = 0;
  uint64_t last_release_ms_ = 0;
  uint64_t retired_lost_ = 0, retired_lost_bytes_ = 0;  // of the rings released
  bool drained_all_ = true;
};

}  // namespace allocscope
