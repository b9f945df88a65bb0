// BpfSession's reads and writes of the kernel's maps: process verdicts, live
// entries and the live filter, unwind tables, exact totals, counters.
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

namespace {

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
constexpr uint32_t kBatch = 4096;

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

}  // namespace

uint8_t BpfSession::process_entry(uint32_t tgid) const {
  uint8_t v = 0;  // none: 0
  bpf_map_lookup_elem(bpf_map__fd(skel_->maps.processes), &tgid, &v);
  return v;
}

void BpfSession::set_verdict_if_none(uint32_t tgid, uint8_t verdict) {
  uint8_t old = process_entry(tgid);
  if (old & AS_PROC_VERDICT_MASK) return;
  verdict |= old;
  // A full table: judged by name, as before.
  bpf_map_update_elem(bpf_map__fd(skel_->maps.processes), &tgid, &verdict, BPF_ANY);
}

bool BpfSession::has_verdict(uint32_t tgid) const { return process_entry(tgid) & AS_PROC_VERDICT_MASK; }

void BpfSession::clear_verdict_if(uint32_t tgid, uint8_t verdict) {
  int fd = bpf_map__fd(skel_->maps.processes);
  uint8_t old = process_entry(tgid);
  if ((old & AS_PROC_VERDICT_MASK) != verdict) return;
  if (old & AS_PROC_IN_PROCESS) {
    uint8_t kept = AS_PROC_IN_PROCESS;
    bpf_map_update_elem(fd, &tgid, &kept, BPF_EXIST);
  } else {
    bpf_map_delete_elem(fd, &tgid);
  }
}

Result<void> BpfSession::set_verdict(uint32_t tgid, uint8_t verdict) {
  int fd = bpf_map__fd(skel_->maps.processes);
  uint8_t old = 0;
  if (bpf_map_lookup_elem(fd, &tgid, &old) == 0)
    verdict |= old & AS_PROC_IN_PROCESS;  // the kernel's to clear
  if (verdict == 0) {
    bpf_map_delete_elem(fd, &tgid);
    return {};
  }
  if (bpf_map_update_elem(fd, &tgid, &verdict, BPF_ANY) != 0)
    return fail_errno("set process verdict (raise --max-processes)", errno);
  return {};
}

Result<void> BpfSession::add_in_process_file(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  uint8_t one = 1;
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.in_process_files), &key, &one, BPF_ANY) != 0)
    return fail_errno("remember an in-process sampler file", errno);
  return {};
}

Result<MapHandle> BpfSession::map_named(const std::string& name, size_t key_size, size_t value_size) const {
  bpf_map* m = bpf_object__find_map_by_name(skel_->obj, name.c_str());
  if (!m) return fail("no BPF map " + name, ENOENT);
  if (bpf_map__key_size(m) != key_size || bpf_map__value_size(m) != value_size)
    return fail("BPF map " + name + ": its key or value is not of the size asked for", EINVAL);
  return MapHandle(m, name);
}

Result<void> BpfSession::mark_in_process(uint32_t tgid) {
  int fd = bpf_map__fd(skel_->maps.processes);
  uint8_t verdict = 0;
  bpf_map_lookup_elem(fd, &tgid, &verdict);
  verdict |= AS_PROC_IN_PROCESS;
  if (bpf_map_update_elem(fd, &tgid, &verdict, BPF_ANY) != 0)
    return fail_errno("mark process " + std::to_string(tgid) + " (raise --max-processes)", errno);
  return {};
}

void BpfSession::unmark_in_process(uint32_t tgid) {
  int fd = bpf_map__fd(skel_->maps.processes);
  uint8_t verdict = process_entry(tgid) & ~uint8_t(AS_PROC_IN_PROCESS);
  if (verdict)
    bpf_map_update_elem(fd, &tgid, &verdict, BPF_EXIST);
  else
    bpf_map_delete_elem(fd, &tgid);
}

std::vector<std::pair<uint32_t, uint64_t>> BpfSession::take_busy() {
  int fd = bpf_map__fd(skel_->maps.busy);
  std::vector<uint32_t> keys;
  uint32_t key = 0, next = 0;
  for (void* prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    keys.push_back(next);
    key = next;
  }
  std::vector<std::pair<uint32_t, uint64_t>> calls;
  for (uint32_t tgid : keys) {
    uint64_t n = 0;
    if (bpf_map_lookup_and_delete_elem(fd, &tgid, &n) == 0) {
      calls.emplace_back(tgid, n);
    } else if (errno != ENOENT && bpf_map_lookup_elem(fd, &tgid, &n) == 0) {
      // Before 5.14 a hash map cannot do both at once: a batch added in
      // between is lost, and that only delays an entry.
      bpf_map_delete_elem(fd, &tgid);
      calls.emplace_back(tgid, n);
    }
  }
  return calls;
}

void BpfSession::forget_live(uint32_t tgid, std::span<const uint64_t> addrs) {
  std::vector<as_live_key> keys;
  keys.reserve(addrs.size());
  for (uint64_t addr : addrs) keys.push_back({.tgid = tgid, .pad = 0, .addr = addr});
  forget_live(keys);
}

// In batches: an exact recording forgets every block its ended processes
// left (thousands a process), and a system call each was most of the exact
// agent's time. A block freed meanwhile is not there, and the kernel has
// lowered its filter slot itself.
void BpfSession::forget_live(std::span<const as_live_key> keys) {
  delete_in_batches(bpf_map__fd(skel_->maps.live), keys, [this](const as_live_key& k) {
    auto* slot = reinterpret_cast<uint32_t*>(live_filter_.data() +
                                             size_t(as_live_slot(k.tgid, k.addr)) * AS_LIVE_FILTER_STRIDE);
    __atomic_fetch_sub(slot, 1, __ATOMIC_RELAXED);
  });
}

Result<void> BpfSession::load_unwind_table(const as_file_key& key, std::span<const as_unwind_row> rows) {
  std::vector<as_unwind_row> table = kernel_layout(rows);
  uint32_t n = uint32_t(table.size());
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
    auto mem = MappedMemory::map_shared(fd, size_t(n) * sizeof(as_unwind_row), "an unwind table");
    if (!mem) return fail(mem.error());
    std::memcpy(mem->data(), table.data(), mem->size());
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

std::vector<std::pair<uint64_t, as_exact_totals>> BpfSession::exact_totals() const {
  return all_entries<uint64_t, as_exact_totals>(bpf_map__fd(skel_->maps.exact_totals));
}

std::vector<std::pair<uint64_t, as_exact_totals>> BpfSession::exact_totals(
    std::span<const uint64_t> ids) const {
  std::vector<std::pair<uint64_t, as_exact_totals>> out;
  for (uint64_t id : ids) {
    as_exact_totals t{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.exact_totals), &id, &t) == 0) out.emplace_back(id, t);
  }
  return out;
}

void BpfSession::forget_exact(std::span<const uint64_t> ids) {
  delete_in_batches(bpf_map__fd(skel_->maps.exact_totals), ids, [](uint64_t) {});
}

std::vector<std::pair<as_live_key, as_live_value>> BpfSession::live_entries() const {
  return all_entries<as_live_key, as_live_value>(bpf_map__fd(skel_->maps.live));
}

// One pass of the kernel over the live map, in one system call: no entry
// copied out, none deleted by a call of its own.
Result<uint64_t> BpfSession::sweep_live() {
  if (!bpf_program__autoload(skel_->progs.sweep_live)) return 0;  // no live entries (--no-free)
  as_sweep sweep{};
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &sweep, .ctx_size_in = sizeof(sweep));
  if (bpf_prog_test_run_opts(bpf_program__fd(skel_->progs.sweep_live), &opts) != 0)
    return fail_errno("sweep the live map of ended programs' blocks", errno);
  return sweep.deleted;
}

bool BpfSession::release_held(uint32_t tgid, uint64_t stamp) {
  return hold_guard_ && hold_guard_->release(tgid, stamp, &hold_times_);
}

size_t BpfSession::release_held_before(uint64_t before_ns, const std::unordered_set<uint32_t>& waiting,
                                       uint64_t waiting_before_ns) {
  return hold_guard_ ? hold_guard_->release_older(before_ns, waiting, waiting_before_ns, &hold_times_) : 0;
}

void BpfSession::forget_file(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.known_files), &key);
}

Result<void> BpfSession::defer_file(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  uint8_t deferred = AS_FILE_DEFERRED;
  // An LRU map: an entry evicted later makes the file new again, and the
  // next process to map it has it examined (and deferred) once more.
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.known_files), &key, &deferred, BPF_ANY) != 0)
    return fail_errno("remember an allocator left to in-process sampling", errno);
  return {};
}

void BpfSession::prepare_at_exec(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  uint8_t prepared = AS_FILE_PREPARED;
  bpf_map_update_elem(bpf_map__fd(skel_->maps.known_files), &key, &prepared, BPF_ANY);
}

void BpfSession::know_file(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  uint8_t known = AS_FILE_KNOWN;
  bpf_map_update_elem(bpf_map__fd(skel_->maps.known_files), &key, &known, BPF_ANY);
}

bool BpfSession::in_process(uint32_t tgid) const {
  uint8_t verdict = 0;
  return bpf_map_lookup_elem(bpf_map__fd(skel_->maps.processes), &tgid, &verdict) == 0 &&
         (verdict & AS_PROC_IN_PROCESS);
}

std::vector<std::pair<uint32_t, uint64_t>> BpfSession::process_drops() const {
  return all_entries<uint32_t, uint64_t>(bpf_map__fd(skel_->maps.process_drops));
}

void BpfSession::set_name_verdict(const std::string& comm, uint64_t cgroup, uint8_t verdict) {
  as_name_key key{};
  comm.copy(key.comm, sizeof(key.comm) - 1);
  key.cgroup = config_.judge_cgroups ? cgroup : 0;
  // LRU: a full table forgets the oldest names, which are judged again.
  bpf_map_update_elem(bpf_map__fd(skel_->maps.name_verdicts), &key, &verdict, BPF_ANY);
}

std::vector<std::pair<uint32_t, as_unjudged_drops>> BpfSession::unjudged_drops() const {
  return all_entries<uint32_t, as_unjudged_drops>(bpf_map__fd(skel_->maps.unjudged_drops));
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
