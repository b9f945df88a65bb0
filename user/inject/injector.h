// liballocscope-preload.so loaded into a running process and attached
// (its allocator slots pointed at it, its sampler started at the rate), and
// detached again: what `record -p` does instead of probing the allocator,
// so that only sampled allocations reach the kernel. One thread is
// borrowed for a few milliseconds each time (remote_thread.h); the others
// run on. The library reaches the process through a memfd it creates
// itself, so that it resolves in any mount namespace or root.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "abi/preload/inject_abi.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace allocscope::inject {

// The library as allocscope holds it: its bytes and where its two entry points lie.
struct LibraryImage {
  std::string path;
  std::vector<uint8_t> bytes;
  uint64_t attach_offset = 0, detach_offset = 0;  // file offsets
};
Result<std::shared_ptr<const LibraryImage>> read_library_image(const std::string& path);

struct InjectOptions {
  std::shared_ptr<const LibraryImage> library;
  uint64_t rate = 0;
  // Sizes and registers a frees ring: allocscope's descriptor of the memfd
  // the target made for it. Empty: the frees of sampled blocks trap.
  std::function<Result<void>(UniqueFd ring)> make_ring;
  // Called with the library's file once the process maps it, before its
  // sampler starts: its probes attached there miss none of its samples.
  // Failing, the library is left dormant and the entry fails.
  std::function<Result<void>(int library)> loaded;
  // Called just before the library starts sampling: addresses of blocks
  // already sampled another way (the probes'), whose frees the library is
  // to send as its own samples'.
  std::function<std::vector<uint64_t>()> seeds;
  // Called once the library samples, with the thread still held (a thread
  // of the process this thread traces), before it is given back.
  std::function<void(pid_t held)> held;
  std::chrono::milliseconds budget{3000};
  bool no_java = false;  // a JVM's agent is not started (--no-java-heap)
};

struct Injection {
  pid_t pid = 0;
  UniqueFd library;  // the library's file as the target maps it: its probes attach here
  uint64_t attach_fn = 0, detach_fn = 0;
  uint64_t detach_offset = 0;  // detach_fn's offset in the library's file
  as_inject_args answer{};
  bool loaded_now = false;              // false: a dormant copy of an earlier injection
  std::chrono::microseconds paused{0};  // how long the borrowed thread was held
  pid_t borrowed = 0;
};

// Whether a mapping's path is a copy of the library an injection loaded.
bool is_injected_library(std::string_view mapped_path);

// A one-line reason when the process cannot take the library (a static or
// set-id program, musl, a seccomp filter, ...); the process is left as it was.
Result<Injection> inject(pid_t pid, const InjectOptions& options);

// Whether the process still maps the library where it was entered (not
// once it ran another program, or ended).
bool still_entered(const Injection& injection);

// Holds a thread of the entered process as an entry does, and calls `fn`
// with it (a thread this thread traces) before giving it back.
Result<void> with_held_thread(const Injection& injection, const std::function<void(pid_t held)>& fn,
                              std::chrono::milliseconds budget);

struct Ejection {
  uint32_t slots = 0;
  std::chrono::microseconds paused{0};
};
// The slots given back, the sampler dormant; the library stays loaded.
// Fails with ESRCH, touching nothing, when the process no longer maps the
// library there (it ran another program, or ended and its id was reused).
Result<Ejection> eject(const Injection& injection, std::chrono::milliseconds budget);

}  // namespace allocscope::inject
