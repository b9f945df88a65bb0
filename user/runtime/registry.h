// Every language runtime a recording reads, one line each in registry.cpp:
// the only file of the core that names them. The recording tells them all
// what its event path meets, through this set.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace allocscope {

class BpfSession;
class Symbolizer;

// What a runtime may use of the recording that reads it.
struct RuntimeServices {
  Symbolizer& symbolizer;
  BpfSession* session = nullptr;  // its kernel tables; null in a recording without BPF
};

class Runtimes {
 public:
  explicit Runtimes(const RuntimeServices& services);
  // None (a recording with no runtime's frames).
  Runtimes() = default;

  void on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino);
  void on_process(pid_t pid);
  void on_mapping(pid_t pid, uint64_t addr, std::string_view name);
  void on_files(const std::vector<std::string>& paths);
  void forget(pid_t pid);
  void read_stack(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> event);
  void place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> event,
                    uint16_t fn, std::vector<uint64_t>& ips);

  void add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const;
  std::vector<std::string> warnings(KernelCounters kernel) const;
  std::vector<RuntimePath> paths() const;

 private:
  std::vector<std::unique_ptr<Runtime>> all_;
};

}  // namespace allocscope
