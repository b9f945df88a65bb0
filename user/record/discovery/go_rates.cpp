#include "record/discovery/go_rates.h"

#include <algorithm>
#include <cerrno>

#include "host/process.h"
#include "host/process_memory.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

std::span<uint8_t> bytes_of(uint64_t& v) { return {reinterpret_cast<uint8_t*>(&v), sizeof v}; }

// The run-time address of `vaddr` in process pid's mapping of the file:
// its executable mapping's start less the address it maps.
Result<uint64_t> run_address(pid_t pid, const ElfFile& elf, uint64_t inode, uint64_t vaddr) {
  auto maps = read_maps(pid);
  if (!maps) return fail(maps.error());
  for (const Mapping& m : *maps) {
    if (m.inode != inode || !m.executable) continue;
    auto mapped = elf.offset_to_vaddr(m.offset);
    if (!mapped) return fail(mapped.error());
    return m.start - *mapped + vaddr;
  }
  return fail("process " + std::to_string(pid) + " no longer maps its program", ESRCH);
}

}  // namespace

Result<void> GoRates::set(pid_t pid, const std::string& path, uint64_t inode, uint64_t vaddr, uint64_t rate) {
  auto elf = ElfFile::open(path);
  if (!elf) return fail(elf.error());
  auto address = run_address(pid, *elf, inode, vaddr);
  if (!address) return fail(address.error());
  uint64_t was = 0, now = rate;
  if (!read_process_memory(pid, *address, bytes_of(was)) ||
      !write_process_memory(pid, *address, bytes_of(now)))
    return fail_errno("set MemProfileRate of process " + std::to_string(pid), errno ? errno : EFAULT);
  written_.push_back({pid, *address, was, now, process_start_ticks(pid), inode});
  return {};
}

bool GoRates::same_program(const Written& w) {
  if (process_start_ticks(w.pid) != w.start_ticks) return false;
  auto maps = read_maps(w.pid);
  return maps &&
         std::any_of(maps->begin(), maps->end(), [&](const Mapping& m) { return m.inode == w.inode; });
}

void GoRates::restore_all() {
  for (Written& w : written_) {
    if (!same_program(w)) continue;
    uint64_t now = 0;
    if (read_process_memory(w.pid, w.address, bytes_of(now)) && now == w.now)
      write_process_memory(w.pid, w.address, bytes_of(w.was));
  }
  written_.clear();
}

}  // namespace allocscope
