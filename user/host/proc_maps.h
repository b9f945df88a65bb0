// /proc/PID/maps, parsed from its text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace allocscope {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;  // file offset of `start`
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  uint64_t inode = 0;
  bool readable = false, writable = false, executable = false;
  bool deleted = false;  // the file was removed or replaced after mapping
  std::string path;      // as the process sees it; "[heap]", "" for anonymous

  bool is_file() const { return inode != 0 && !path.empty() && path.front() == '/'; }
  uint64_t file_offset(uint64_t addr) const { return addr - start + offset; }
};

std::vector<Mapping> parse_maps(std::string_view text);

// The mapping that contains addr, or nullptr. `maps` must be sorted by start.
const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr);

// Whether a file name is a C library that provides malloc (glibc or musl).
bool is_c_library_name(std::string_view path);

// The executable mapping of the first C library in `maps`, or nullptr.
const Mapping* find_c_library(const std::vector<Mapping>& maps);

}  // namespace allocscope
