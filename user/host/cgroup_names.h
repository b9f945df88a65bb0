// Paths of cgroup v2 directories by id (the directory's inode number, the id
// samples carry). Learnt as cgroups are made (the kernel's cgroup_mkdir
// events, which come before any process runs in them), and for those made
// before the recording by walking the hierarchy when an unknown id is met:
// a sample from a unit or container that lived 10 ms is still named by it.
// Bounded: past its capacity the table starts afresh (counted), and ids met
// again are walked for (those of cgroups still there are found).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

namespace allocscope {

class CgroupNames {
 public:
  // `walk`: the path of a cgroup that exists now, "" if none (tests give
  // their own; the default walks the cgroup2 mount).
  using Walk = std::function<std::string(uint64_t id)>;
  explicit CgroupNames(size_t capacity = 65536, Walk walk = {});

  // A cgroup made: `path` below the hierarchy's root ("/system.slice/x.service").
  void learn(uint64_t id, std::string path);
  // Its path, "" when neither learnt nor found (0: unknown id).
  const std::string& path_of(uint64_t id);
  size_t size() const { return paths_.size(); }
  uint64_t forgotten() const { return forgotten_; }

 private:
  void make_room();

  size_t capacity_;
  Walk walk_;
  std::unordered_map<uint64_t, std::string> paths_;
  uint64_t forgotten_ = 0;
};

}  // namespace allocscope
