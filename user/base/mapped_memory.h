// An owned shared mapping of a file descriptor: unmapped once, when its owner
// goes; moves, never copies.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include "base/result.h"

namespace allocscope {

class MappedMemory {
 public:
  MappedMemory() = default;
  // Maps `bytes` of `fd` shared, read and write (BPF arrays made mmapable).
  static Result<MappedMemory> map_shared(int fd, size_t bytes, const char* what) {
    void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) return fail_errno(std::string("map ") + what, errno);
    return MappedMemory(addr, bytes);
  }
  // Maps `bytes` of `fd` shared, read only (a BPF ring buffer's positions).
  static Result<MappedMemory> map_shared_read(int fd, size_t bytes, const char* what) {
    void* addr = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) return fail_errno(std::string("map ") + what, errno);
    return MappedMemory(addr, bytes);
  }
  MappedMemory(MappedMemory&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  MappedMemory& operator=(MappedMemory&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;
  ~MappedMemory() { reset(); }

  std::byte* data() const { return static_cast<std::byte*>(addr_); }
  size_t size() const { return bytes_; }

 private:
  MappedMemory(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  void reset() {
    if (addr_) munmap(addr_, bytes_);
    addr_ = nullptr;
    bytes_ = 0;
  }

  void* addr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace allocscope
