#include "host/process_memory.h"

#include <sys/uio.h>

namespace allocscope {

bool read_process_memory(pid_t pid, uint64_t addr, std::span<uint8_t> out) {
  if (out.empty()) return true;
  iovec local{out.data(), out.size()};
  iovec remote{reinterpret_cast<void*>(addr), out.size()};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == ssize_t(out.size());
}

bool write_process_memory(pid_t pid, uint64_t addr, std::span<const uint8_t> in) {
  if (in.empty()) return true;
  iovec local{const_cast<uint8_t*>(in.data()), in.size()};
  iovec remote{reinterpret_cast<void*>(addr), in.size()};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == ssize_t(in.size());
}

}  // namespace allocscope
