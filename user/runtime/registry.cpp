#include "runtime/registry.h"

#include <algorithm>

#include "runtime/go/go_runtime.h"
#include "runtime/go/heap_route.h"
#include "runtime/go/tables.h"
#include "runtime/jvm/jvm_runtime.h"
#include "runtime/python/python_runtime.h"
#include "runtime/v8/v8_runtime.h"

namespace allocscope {

namespace {

// A runtime's room as the core takes it; null: the room has none of that.
struct Room {
  std::unique_ptr<Runtime> (*make)(const RuntimeServices&);
  RuntimeTablesReader tables;
  EntryFinder entries;
};

// A new runtime: its room's line here.
const Room kRooms[] = {
    {make_python_runtime, nullptr, nullptr},
    {make_go_runtime, read_go_tables, go_allocation_entries},
    {make_jvm_runtime, nullptr, nullptr},
    {make_v8_runtime, nullptr, nullptr},
};

}  // namespace

const RuntimeTablesReaders& runtime_tables_readers() {
  static const RuntimeTablesReaders readers = [] {
    RuntimeTablesReaders r;
    for (const Room& room : kRooms)
      if (room.tables) r.push_back(room.tables);
    return r;
  }();
  return readers;
}

const EntryFinders& runtime_entry_finders() {
  static const EntryFinders finders = [] {
    EntryFinders f;
    for (const Room& room : kRooms)
      if (room.entries) f.push_back(room.entries);
    return f;
  }();
  return finders;
}

Runtimes::Runtimes(const RuntimeServices& services) {
  for (const Room& room : kRooms)
    if (std::unique_ptr<Runtime> r = room.make ? room.make(services) : nullptr) all_.push_back(std::move(r));
}

HeapRoute Runtimes::choose_targets(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                                   const std::vector<ProbeTarget>& found) {
  HeapRoute route;
  for (auto& r : all_) {
    HeapRoute own = r->choose_targets(file, targets, found);
    route.probed |= own.probed;
    if (route.unprobed.empty()) route.unprobed = std::move(own.unprobed);
  }
  return route;
}

void Runtimes::on_probed(const ProbedFile& file, const std::vector<ProbeTarget>& attached) {
  for (auto& r : all_) r->on_probed(file, attached);
}

std::string Runtimes::unprobed_program(uint32_t kernel_dev, uint64_t ino) const {
  for (const auto& r : all_)
    if (std::string why = r->unprobed_program(kernel_dev, ino); !why.empty()) return why;
  return "";
}

bool Runtimes::owns_program(uint32_t kernel_dev, uint64_t ino) const {
  return std::any_of(all_.begin(), all_.end(),
                     [&](const auto& r) { return r->owns_program(kernel_dev, ino); });
}

bool Runtimes::reads_heap_of(pid_t pid) const {
  return std::any_of(all_.begin(), all_.end(), [pid](const auto& r) { return r->reads_heap_of(pid); });
}

std::vector<pid_t> Runtimes::processes_to_enter(size_t most) {
  std::vector<pid_t> out;
  for (auto& r : all_)
    for (pid_t pid : r->processes_to_enter(most - out.size())) out.push_back(pid);
  return out;
}

void Runtimes::recheck(uint64_t now_ms) {
  for (auto& r : all_) r->recheck(now_ms);
}

void Runtimes::restore() {
  for (auto& r : all_) r->restore();
}

std::vector<std::string> Runtimes::probed_heaps() const {
  std::vector<std::string> out;
  for (const auto& r : all_)
    for (std::string& h : r->probed_heaps()) out.push_back(std::move(h));
  return out;
}

uint64_t Runtimes::programs_unread() const {
  uint64_t n = 0;
  for (const auto& r : all_) n += r->programs_unread();
  return n;
}

void Runtimes::on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino) {
  for (auto& r : all_) r->on_program(pid, kernel_dev, ino);
}

void Runtimes::on_process(pid_t pid) {
  for (auto& r : all_) r->on_process(pid);
}

void Runtimes::on_mapping(pid_t pid, uint64_t addr, std::string_view name) {
  for (auto& r : all_) r->on_mapping(pid, addr, name);
}

void Runtimes::on_files(const std::vector<std::string>& paths) {
  for (auto& r : all_) r->on_files(paths);
}

void Runtimes::forget(pid_t pid) {
  for (auto& r : all_) r->forget(pid);
}

void Runtimes::read_stack(pid_t pid, std::span<const Mapping> kernel_maps,
                          std::span<const uint8_t> runtime_part) {
  for (auto& r : all_) r->read_stack(pid, kernel_maps, runtime_part);
}

void Runtimes::place_frames(pid_t pid, std::span<const Mapping> kernel_maps,
                            std::span<const uint8_t> runtime_part, uint16_t fn, std::vector<uint64_t>& ips) {
  for (auto& r : all_) r->place_frames(pid, kernel_maps, runtime_part, fn, ips);
}

void Runtimes::place_agent_frames(pid_t pid, std::string_view agent, std::span<const uint8_t> frames,
                                  std::vector<uint64_t>& ips) {
  for (auto& r : all_) r->place_agent_frames(pid, agent, frames, ips);
}

void Runtimes::on_agent_note(pid_t pid, std::string_view agent, const std::string& text) {
  for (auto& r : all_) r->on_agent_note(pid, agent, text);
}

void Runtimes::add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const {
  for (const auto& r : all_) r->add_counters(kernel, out);
}

std::vector<std::string> Runtimes::warnings(KernelCounters kernel) const {
  std::vector<std::string> out;
  for (const auto& r : all_)
    for (std::string& w : r->warnings(kernel)) out.push_back(std::move(w));
  return out;
}

std::vector<RuntimePath> Runtimes::paths() const {
  std::vector<RuntimePath> out;
  for (const auto& r : all_)
    for (RuntimePath& p : r->paths()) out.push_back(std::move(p));
  return out;
}

}  // namespace allocscope
