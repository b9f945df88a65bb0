// A runtime whose garbage-collected heap allocscope does not read (yet):
// the JVM's, V8's. The processes it runs in are found by their mappings
// (its library or program) when they are sampled, and the summary says in
// one line that their managed heap is not in the profile: a JVM that
// allocated 205 MB must not read as the 9 MiB of HotSpot's own mallocs
// with nothing said.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/runtime.h"
#include "symbols/symbolizer.h"

namespace allocscope {

class UnreadHeapRuntime : public Runtime {
 public:
  struct Words {
    std::string room;      // "jvm": the summary's prefix, the counter's name
    std::string heap;      // "the Java heap"
    std::string counted;   // what the profile holds of them instead
    std::string why = {};  // why, where nothing more is known ("": not said)
  };
  // `runs_it`: whether a mapped file's name (its last component) is the runtime's.
  UnreadHeapRuntime(Symbolizer& symbolizer, bool (*runs_it)(std::string_view name), Words words)
      : symbolizer_(symbolizer), runs_it_(runs_it), words_(std::move(words)) {}

  void place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> runtime_part,
                    uint16_t fn, std::vector<uint64_t>& ips) override;
  void forget(pid_t pid) override { looked_.erase(pid); }
  void add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const override;
  std::vector<std::string> warnings(KernelCounters kernel) const override;

 protected:
  // Process `pid`'s heap is read after all (by the runtime's agent): it is
  // no longer named, nor looked at.
  void heap_read(pid_t pid);
  // Why process `pid`'s heap is not read, as its agent said.
  void heap_unread(pid_t pid, const std::string& why);
  size_t read_processes() const { return read_.size(); }
  // Process `pid` was found to run the runtime, its heap unread.
  virtual void found(pid_t /*pid*/) {}
  // Whether process `pid` maps the runtime's file now (read from /proc).
  bool runs_now(pid_t pid) const;
  // Process `pid` found otherwise than by a sample (its mappings read).
  void judge(pid_t pid, const std::string& file);

 private:
  static constexpr size_t kMaxPids = 4096, kMaxNamed = 3;
  // The name of the runtime's file among `maps`; "" when none is.
  std::string runtime_file(std::span<const Mapping> maps) const;
  // One note: the processes unread for `why` ("": none said).
  std::string note(const std::string& why, const std::vector<std::string>& who, size_t count) const;

  Symbolizer& symbolizer_;
  bool (*runs_it_)(std::string_view);
  Words words_;
  std::map<pid_t, size_t> looked_;  // processes not the runtime's: their mappings then (a loader maps more)
  struct Judged {
    std::string name;  // "java 1234" (or "libjvm.so 1234", ended)
    std::string why;   // as the runtime's agent said; "" when it said nothing
  };
  std::map<pid_t, Judged> judged_;  // the runtime's processes found unread (a pid reused later counts once)
  std::set<pid_t> read_;            // ... whose heap its agent reads
  bool more_ = false;               // more than kMaxPids
};

}  // namespace allocscope
