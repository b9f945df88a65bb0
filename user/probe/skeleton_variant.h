// A BPF skeleton opened with the bytes of another build of its source (the
// same maps and programs, found by name): the object built for this
// kernel's prototype of a kfunc (allocscope.h, AS_SESSION_KFUNC_CTX).
#pragma once

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdlib>

namespace allocscope {

// `variant_bytes` is the other build's elf_bytes function, or nullptr for
// the skeleton's own. nullptr and errno on failure, as the skeleton's open.
template <typename T>
T* open_skeleton(int (*create)(T*), void (*destroy)(T*), const void* (*variant_bytes)(size_t*)) {
  auto* obj = static_cast<T*>(calloc(1, sizeof(T)));
  if (!obj) return nullptr;
  int err = create(obj);
  if (!err && variant_bytes) obj->skeleton->data = const_cast<void*>(variant_bytes(&obj->skeleton->data_sz));
  if (!err) err = bpf_object__open_skeleton(obj->skeleton, nullptr);
  if (err) {
    destroy(obj);
    errno = -err;
    return nullptr;
  }
  return obj;
}

}  // namespace allocscope
