#include "probe/session/kernel_map.h"

#include <bpf/libbpf.h>

namespace allocscope {

Result<void> MapHandle::put(std::span<const uint8_t> key, std::span<const uint8_t> value,
                            const std::string& what) const {
  if (int err = bpf_map__update_elem(map_, key.data(), key.size(), value.data(), value.size(), BPF_ANY))
    return fail_errno(what, -err);
  return {};
}

bool MapHandle::get(std::span<const uint8_t> key, std::span<uint8_t> value) const {
  return bpf_map__lookup_elem(map_, key.data(), key.size(), value.data(), value.size(), 0) == 0;
}

}  // namespace allocscope
