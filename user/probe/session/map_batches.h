// Reading and deleting many entries of a BPF map at once, in batches where
// the kernel can (one system call for thousands), entry by entry where not.
// The map families' (process_maps, live_maps) shared means.
#pragma once

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace allocscope::map_batches {

// Every entry of a hash map, through get_next_key (the map may change under
// us: entries added meanwhile may be missed, deleted ones skipped): two
// system calls an entry.
template <typename K, typename V>
std::vector<std::pair<K, V>> entries_by_key(int fd) {
  std::vector<std::pair<K, V>> out;
  K key{}, next{};
  K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) out.emplace_back(next, value);
    key = next;
    prev = &key;
  }
  return out;
}

// The same in batches, one system call for up to kBatch entries: the
// exact agent reads its totals every few seconds, tens of thousands of
// them. Whole buckets come at once (a bucket larger than the batch is
// ENOSPC); where the kernel or map cannot, entry by entry.
inline constexpr uint32_t kBatch = 4096;

template <typename K, typename V>
std::vector<std::pair<K, V>> all_entries(int fd) {
  std::vector<std::pair<K, V>> out;
  std::vector<K> keys(kBatch);
  std::vector<V> values(kBatch);
  uint64_t cursor = 0, next = 0;  // the kernel's own position (a bucket for a hash map)
  for (bool first = true;; first = false) {
    uint32_t count = kBatch;
    int rc = bpf_map_lookup_batch(fd, first ? nullptr : &cursor, &next, keys.data(), values.data(), &count,
                                  nullptr);
    if (rc != 0 && errno != ENOENT) return entries_by_key<K, V>(fd);
    for (uint32_t i = 0; i < count && i < kBatch; ++i) out.emplace_back(keys[i], values[i]);
    if (rc != 0) return out;  // ENOENT: the map's end
    cursor = next;
  }
}

// Deletes `keys` in batches, calling deleted(key) for each the kernel had.
// A key it has not (freed or never counted meanwhile) stops a batch, and
// the rest go on after it; where the kernel cannot batch, key by key.
template <typename K, typename F>
void delete_in_batches(int fd, std::span<const K> keys, F deleted) {
  while (!keys.empty()) {
    uint32_t count = uint32_t(std::min<size_t>(keys.size(), kBatch));
    int rc = bpf_map_delete_batch(fd, keys.data(), &count, nullptr);
    if (rc != 0 && errno != ENOENT) count = 0;  // the kernel cannot: the count is not its own
    for (uint32_t i = 0; i < count; ++i) deleted(keys[i]);
    if (rc == 0) {
      keys = keys.subspan(count);
      continue;
    }
    if (count < keys.size() && bpf_map_delete_elem(fd, &keys[count]) == 0) deleted(keys[count]);
    keys = keys.subspan(std::min<size_t>(keys.size(), count + 1));
  }
}

}  // namespace allocscope::map_batches
