// BpfSession's reads and writes of the kernel's maps that are not a
// family's of their own (process_maps, file_marks, live_maps): unwind
// tables, holds, counters, and a runtime's maps by name.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "allocscope.h"  // before the skeleton, which names its types
#include "probe/session/bpf_session.h"
// clang-format off
#include "allocscope.skel.h"
// clang-format on
#include "symbols/unwind_table.h"

namespace allocscope {

Result<MapHandle> BpfSession::map_named(const std::string& name, size_t key_size, size_t value_size) const {
  bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name.c_str());
  if (!m) return fail("no BPF map " + name, ENOENT);
  if (bpf_map__key_size(m) != key_size || bpf_map__value_size(m) != value_size)
    return fail("BPF map " + name + ": its key or value is not of the size asked for", EINVAL);
  return MapHandle(m, name);
}

Result<void> BpfSession::load_unwind_table(const as_file_key& key, std::span<const as_unwind_row> rows) {
  uint32_t n = uint32_t(kernel_layout_size(rows));
  size_t bytes = size_t(n) * sizeof(as_unwind_row);
  // Typed as libbpf typed the outer map's template: kernels before 6.2
  // compare the two maps' BTF-derived layouts (a map without BTF differs
  // from one with it) and refuse the insert otherwise.
  LIBBPF_OPTS(bpf_map_create_opts, opts, .btf_fd = uint32_t(btf__fd(bpf_object__btf(skel_->obj))),
              .btf_key_type_id = table_btf_key_, .btf_value_type_id = table_btf_value_,
              .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
  int fd =
      bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", sizeof(uint32_t), sizeof(as_unwind_row), n, &opts);
  if (fd < 0) return fail_errno("create an unwind table of " + std::to_string(n) + " rows", errno);
  UniqueFd owner(fd);  // the outer map holds its own reference
  {
    // Written in place: a large program's table is millions of rows.
    auto mem = MappedMemory::map_shared(fd, bytes, "an unwind table");
    if (!mem) return fail(mem.error());
    write_kernel_layout(rows, {reinterpret_cast<as_unwind_row*>(mem->data()), n});
  }
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.unwind_tables), &key, &fd, BPF_ANY) != 0)
    return fail_errno("load an unwind table (raise the table count)", errno);
  forget_table_request(key);
  return {};
}

bool BpfSession::has_unwind_table(const as_file_key& key) const {
  uint32_t id = 0;
  return bpf_map_lookup_elem(bpf_map__fd(skel_->maps.unwind_tables), &key, &id) == 0;
}

std::optional<std::vector<as_vma>> BpfSession::code_mappings(pid_t pid) const {
  union bpf_iter_link_info info = {};
  info.task.pid = uint32_t(pid);
  LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof info);
  Link link(bpf_program__attach_iter(skel_->progs.list_code_vmas, &opts));
  if (!link) return std::nullopt;
  UniqueFd iter(bpf_iter_create(bpf_link__fd(link.get())));
  if (!iter) return std::nullopt;
  std::vector<as_vma> vmas;
  as_vma v;
  for (ssize_t got; (got = read(iter.get(), &v, sizeof v)) != 0;) {
    if (got < 0 && errno == EINTR) continue;
    if (got != ssize_t(sizeof v)) return std::nullopt;  // the process went away meanwhile, or a short record
    vmas.push_back(v);
  }
  return vmas;
}

void BpfSession::forget_table_request(const as_file_key& key) {
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.table_requests), &key);
}

bool BpfSession::release_held(uint32_t tgid, uint64_t stamp) {
  return hold_guard_ && hold_guard_->release(tgid, stamp, &hold_times_);
}

size_t BpfSession::release_held_before(uint64_t before_ns, const std::unordered_set<uint32_t>& waiting,
                                       uint64_t waiting_before_ns, std::vector<uint32_t>* pids) {
  return hold_guard_ ? hold_guard_->release_older(before_ns, waiting, waiting_before_ns, &hold_times_, pids)
                     : 0;
}

Counters BpfSession::counters() const {
  Counters total{};
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(ncpu > 0 ? ncpu : 1);
  for (uint32_t i = 0; i < AS_CNT_COUNT; ++i) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &i, values.data()) != 0) continue;
    for (uint64_t v : values) total[i] += v;
  }
  return total;
}

}  // namespace allocscope
