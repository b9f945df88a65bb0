#include "probe/session/process_maps.h"

#include <bpf/bpf.h>

#include <cerrno>

#include "probe/session/map_batches.h"

namespace allocscope {

uint8_t ProcessMaps::entry(uint32_t tgid) const {
  uint8_t v = 0;  // none: 0
  bpf_map_lookup_elem(fds_.processes, &tgid, &v);
  return v;
}

void ProcessMaps::set_verdict_if_none(uint32_t tgid, uint8_t verdict) {
  uint8_t old = entry(tgid);
  if (old & AS_PROC_VERDICT_MASK) return;
  verdict |= old;
  // A full table: judged by name, as before.
  bpf_map_update_elem(fds_.processes, &tgid, &verdict, BPF_ANY);
}

bool ProcessMaps::has_verdict(uint32_t tgid) const { return entry(tgid) & AS_PROC_VERDICT_MASK; }

void ProcessMaps::clear_verdict_if(uint32_t tgid, uint8_t verdict) {
  uint8_t old = entry(tgid);
  if ((old & AS_PROC_VERDICT_MASK) != verdict) return;
  if (old & AS_PROC_IN_PROCESS) {
    uint8_t kept = AS_PROC_IN_PROCESS;
    bpf_map_update_elem(fds_.processes, &tgid, &kept, BPF_EXIST);
  } else {
    bpf_map_delete_elem(fds_.processes, &tgid);
  }
}

Result<void> ProcessMaps::set_verdict(uint32_t tgid, uint8_t verdict) {
  uint8_t old = 0;
  if (bpf_map_lookup_elem(fds_.processes, &tgid, &old) == 0)
    verdict |= old & AS_PROC_IN_PROCESS;  // the kernel's to clear
  if (verdict == 0) {
    bpf_map_delete_elem(fds_.processes, &tgid);
    return {};
  }
  if (bpf_map_update_elem(fds_.processes, &tgid, &verdict, BPF_ANY) != 0)
    return fail_errno("set process verdict (raise --max-processes)", errno);
  return {};
}

Result<void> ProcessMaps::mark_in_process(uint32_t tgid) {
  uint8_t verdict = entry(tgid) | AS_PROC_IN_PROCESS;
  if (bpf_map_update_elem(fds_.processes, &tgid, &verdict, BPF_ANY) != 0)
    return fail_errno("mark process " + std::to_string(tgid) + " (raise --max-processes)", errno);
  return {};
}

void ProcessMaps::unmark_in_process(uint32_t tgid) {
  uint8_t verdict = entry(tgid) & ~uint8_t(AS_PROC_IN_PROCESS);
  if (verdict)
    bpf_map_update_elem(fds_.processes, &tgid, &verdict, BPF_EXIST);
  else
    bpf_map_delete_elem(fds_.processes, &tgid);
}

bool ProcessMaps::in_process(uint32_t tgid) const {
  uint8_t verdict = 0;
  return bpf_map_lookup_elem(fds_.processes, &tgid, &verdict) == 0 && (verdict & AS_PROC_IN_PROCESS);
}

void ProcessMaps::set_name_verdict(const std::string& comm, uint64_t cgroup, uint8_t verdict) {
  as_name_key key{};
  comm.copy(key.comm, sizeof(key.comm) - 1);
  key.cgroup = judge_cgroups_ ? cgroup : 0;
  // LRU: a full table forgets the oldest names, which are judged again.
  bpf_map_update_elem(fds_.name_verdicts, &key, &verdict, BPF_ANY);
}

std::vector<std::pair<uint32_t, uint64_t>> ProcessMaps::take_busy() {
  std::vector<uint32_t> keys;
  uint32_t key = 0, next = 0;
  for (void* prev = nullptr; bpf_map_get_next_key(fds_.busy, prev, &next) == 0; prev = &key) {
    keys.push_back(next);
    key = next;
  }
  std::vector<std::pair<uint32_t, uint64_t>> calls;
  for (uint32_t tgid : keys) {
    uint64_t n = 0;
    if (bpf_map_lookup_and_delete_elem(fds_.busy, &tgid, &n) == 0) {
      calls.emplace_back(tgid, n);
    } else if (errno != ENOENT && bpf_map_lookup_elem(fds_.busy, &tgid, &n) == 0) {
      // Before 5.14 a hash map cannot do both at once: a batch added in
      // between is lost, and that only delays an entry.
      bpf_map_delete_elem(fds_.busy, &tgid);
      calls.emplace_back(tgid, n);
    }
  }
  return calls;
}

std::vector<std::pair<uint32_t, uint64_t>> ProcessMaps::drops() const {
  return map_batches::all_entries<uint32_t, uint64_t>(fds_.process_drops);
}

std::vector<std::pair<uint32_t, as_unjudged_drops>> ProcessMaps::unjudged_drops() const {
  return map_batches::all_entries<uint32_t, as_unjudged_drops>(fds_.unjudged_drops);
}

}  // namespace allocscope
