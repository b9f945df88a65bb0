#include "runtime/go/rates.h"

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
  return fail("process " + std::to_string(pid) + " does not run the program", ESRCH);
}

}  // namespace

Result<void> GoRates::set(pid_t pid, const GoRateSite& site, uint64_t rate, uint64_t now_ms) {
  if (written_.size() >= kMaxWritten) recheck(now_ms);  // forgets those that ended
  if (written_.size() >= kMaxWritten)
    return fail("allocscope sets the rate of " + std::to_string(kMaxWritten) + " Go processes at most",
                ENOSPC);
  uint64_t started = process_start_ticks(pid);
  if (std::any_of(written_.begin(), written_.end(), [&](const Written& w) {
        return w.pid == pid && w.start_ticks == started && w.inode == site.inode;
      }))
    return {};  // given it already (held at an exec that brought its file too)
  auto elf = ElfFile::open(site.path);
  if (!elf) return fail(elf.error());
  auto address = run_address(pid, *elf, site.inode, site.rate);
  if (!address) return fail(address.error());
  std::string what = "set MemProfileRate of process " + std::to_string(pid);
  // Off before the rate: a runtime that has not started keeps the rate
  // written; one that has reads the switch no more.
  uint64_t switch_address = 0;
  if (site.linked_out_switch) {
    uint8_t on = 0, off = 0;
    uint64_t at = *address - site.rate + site.linked_out_switch;
    if (!read_process_memory(pid, at, std::span(&on, 1))) return fail_errno(what, errno ? errno : EFAULT);
    if (on == 1 && !write_process_memory(pid, at, std::span(&off, 1)))
      return fail_errno(what, errno ? errno : EFAULT);
    if (on == 1) switch_address = at;
  }
  uint64_t was = 0, now = rate;
  if (!read_process_memory(pid, *address, bytes_of(was)) ||
      !write_process_memory(pid, *address, bytes_of(now)))
    return fail_errno(what, errno ? errno : EFAULT);
  // Caught before its runtime started, the program would have run at 0.
  if (switch_address) was = 0;
  written_.push_back({pid, *address, was, now, switch_address, started, site.inode, now_ms, false});
  return {};
}

bool GoRates::same_program(const Written& w) {
  if (process_start_ticks(w.pid) != w.start_ticks) return false;
  auto maps = read_maps(w.pid);
  return maps &&
         std::any_of(maps->begin(), maps->end(), [&](const Mapping& m) { return m.inode == w.inode; });
}

void GoRates::recheck(uint64_t now_ms) {
  constexpr uint64_t kRuntimesDefault = 512 * 1024, kStartedMs = 200;
  std::erase_if(written_, [](const Written& w) { return !same_program(w); });
  for (Written& w : written_) {
    if (w.checked || now_ms < w.set_ms + kStartedMs) continue;
    w.checked = true;
    uint64_t now = 0;
    if (read_process_memory(w.pid, w.address, bytes_of(now)) && now != w.now &&
        (now == 0 || now == kRuntimesDefault))
      write_process_memory(w.pid, w.address, bytes_of(w.now));
  }
}

void GoRates::restore_all() {
  for (Written& w : written_) {
    if (!same_program(w)) continue;
    uint64_t now = 0;
    if (read_process_memory(w.pid, w.address, bytes_of(now)) && now == w.now)
      write_process_memory(w.pid, w.address, bytes_of(w.was));
    uint8_t on = 1;
    if (w.switch_address) write_process_memory(w.pid, w.switch_address, std::span(&on, 1));
  }
  written_.clear();
}

}  // namespace allocscope
