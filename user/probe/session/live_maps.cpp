#include "probe/session/live_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>

#include "probe/session/map_batches.h"

namespace allocscope {

void LiveMaps::forget(uint32_t tgid, std::span<const uint64_t> addrs) {
  std::vector<as_live_key> keys;
  keys.reserve(addrs.size());
  for (uint64_t addr : addrs) keys.push_back({.tgid = tgid, .pad = 0, .addr = addr});
  forget(keys);
}

// In batches: an exact recording forgets every block its ended processes
// left (thousands a process), and a system call each was most of the exact
// agent's time. A block freed meanwhile is not there, and the kernel has
// lowered its filter slot itself.
void LiveMaps::forget(std::span<const as_live_key> keys) {
  map_batches::delete_in_batches(fds_.live, keys, [this](const as_live_key& k) {
    auto* slot =
        reinterpret_cast<uint32_t*>(filter_ + size_t(as_live_slot(k.tgid, k.addr)) * AS_LIVE_FILTER_STRIDE);
    __atomic_fetch_sub(slot, 1, __ATOMIC_RELAXED);
  });
}

std::vector<std::pair<as_live_key, as_live_value>> LiveMaps::entries() const {
  return map_batches::all_entries<as_live_key, as_live_value>(fds_.live);
}

// One pass of the kernel over the live map, in one system call: no entry
// copied out, none deleted by a call of its own.
Result<uint64_t> LiveMaps::sweep() {
  if (fds_.sweep_program < 0) return 0;
  as_sweep sweep{};
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &sweep, .ctx_size_in = sizeof(sweep));
  if (bpf_prog_test_run_opts(fds_.sweep_program, &opts) != 0)
    return fail_errno("sweep the live map of ended programs' blocks", errno);
  return sweep.deleted;
}

std::vector<std::pair<uint64_t, as_exact_totals>> LiveMaps::exact_totals() const {
  return map_batches::all_entries<uint64_t, as_exact_totals>(fds_.exact_totals);
}

std::vector<std::pair<uint64_t, as_exact_totals>> LiveMaps::exact_totals(
    std::span<const uint64_t> ids) const {
  std::vector<std::pair<uint64_t, as_exact_totals>> out;
  for (uint64_t id : ids) {
    as_exact_totals t{};
    if (bpf_map_lookup_elem(fds_.exact_totals, &id, &t) == 0) out.emplace_back(id, t);
  }
  return out;
}

void LiveMaps::forget_exact(std::span<const uint64_t> ids) {
  map_batches::delete_in_batches(fds_.exact_totals, ids, [](uint64_t) {});
}

}  // namespace allocscope
