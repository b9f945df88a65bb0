// A map of the session's BPF object by its name, typed: its key's and
// value's sizes checked against the kernel's when the handle is made. What
// a runtime's room writes into its own maps (bpf/python.bpf.h's), without a
// method of the session's per map.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "base/result.h"

struct bpf_map;

namespace allocscope {

class MapHandle {
 public:
  MapHandle(bpf_map* map, std::string name) : map_(map), name_(std::move(name)) {}
  // Written (made or replaced); `what` names the write in an error.
  Result<void> put(std::span<const uint8_t> key, std::span<const uint8_t> value,
                   const std::string& what) const;
  // Read into `value`; false when the key is not there (or the read failed).
  bool get(std::span<const uint8_t> key, std::span<uint8_t> value) const;
  const std::string& name() const { return name_; }

 private:
  bpf_map* map_;
  std::string name_;
};

template <typename Key, typename Value>
class KernelMap {
  static_assert(std::is_trivially_copyable_v<Key> && std::is_trivially_copyable_v<Value>);

 public:
  explicit KernelMap(MapHandle map) : map_(std::move(map)) {}
  Result<void> put(const Key& key, const Value& value, const std::string& what) const {
    return map_.put({reinterpret_cast<const uint8_t*>(&key), sizeof key},
                    {reinterpret_cast<const uint8_t*>(&value), sizeof value}, what);
  }
  std::optional<Value> get(const Key& key) const {
    Value value{};
    if (!map_.get({reinterpret_cast<const uint8_t*>(&key), sizeof key},
                  {reinterpret_cast<uint8_t*>(&value), sizeof value}))
      return std::nullopt;
    return value;
  }

 private:
  MapHandle map_;
};

}  // namespace allocscope
