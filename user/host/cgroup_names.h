// Paths of cgroup v2 directories by id (the directory's inode number, the id
// samples carry). Learnt as cgroups are made (the kernel's cgroup_mkdir
// events, which come before any process runs in them), and for those made
// before the recording by walking the hierarchy when an unknown id is met:
// a sample from a unit or container that lived 10 ms is still named by it.
// Removed cgroups (the kernel's cgroup_rmdir events) are forgotten once
// their owner says no sample can need them any more. Bounded: past its
// capacity the removed ones go first, then the table starts afresh (both
// counted), and ids met again are walked for (those still there are found).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
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
  // The cgroup was removed at `now_ms` (any clock the caller keeps).
  void removed(uint64_t id, uint64_t now_ms);
  // Forgets the cgroups removed before `before_ms`; how many.
  size_t forget_removed(uint64_t before_ms);
  size_t size() const { return paths_.size(); }
  uint64_t forgotten() const { return forgotten_; }

 private:
  struct Entry {
    std::string path;
    uint64_t removed_ms = 0;  // 0: not removed (as far as told)
  };
  void make_room();

  size_t capacity_;
  Walk walk_;
  std::unordered_map<uint64_t, Entry> paths_;
  std::deque<std::pair<uint64_t, uint64_t>> removals_;  // (when, id), oldest first
  uint64_t forgotten_ = 0;
};

}  // namespace allocscope
