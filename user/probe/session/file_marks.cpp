#include "probe/session/file_marks.h"

#include <bpf/bpf.h>

#include <cerrno>

#include "allocscope.h"

namespace allocscope {
namespace {

as_file_key file_key(uint32_t kernel_dev, uint64_t ino) { return {.ino = ino, .dev = kernel_dev, .pad = 0}; }

}  // namespace

void FileMarks::forget(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key = file_key(kernel_dev, ino);
  bpf_map_delete_elem(known_, &key);
}

Result<void> FileMarks::defer(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key = file_key(kernel_dev, ino);
  uint8_t deferred = AS_FILE_DEFERRED;
  // An LRU map: an entry evicted later makes the file new again, and the
  // next process to map it has it examined (and deferred) once more.
  if (bpf_map_update_elem(known_, &key, &deferred, BPF_ANY) != 0)
    return fail_errno("remember an allocator left to in-process sampling", errno);
  return {};
}

void FileMarks::know(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key = file_key(kernel_dev, ino);
  uint8_t known = AS_FILE_KNOWN;
  bpf_map_update_elem(known_, &key, &known, BPF_ANY);
}

void FileMarks::prepare_at_exec(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key = file_key(kernel_dev, ino);
  uint8_t prepared = AS_FILE_PREPARED;
  bpf_map_update_elem(known_, &key, &prepared, BPF_ANY);
}

Result<void> FileMarks::add_in_process(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key = file_key(kernel_dev, ino);
  uint8_t one = 1;
  if (bpf_map_update_elem(in_process_, &key, &one, BPF_ANY) != 0)
    return fail_errno("remember an in-process sampler file", errno);
  return {};
}

}  // namespace allocscope
