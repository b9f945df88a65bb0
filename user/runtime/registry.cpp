#include "runtime/registry.h"

#include "runtime/python/python_runtime.h"

namespace allocscope {

Runtimes::Runtimes(const RuntimeServices& services) {
  // A new runtime: its room's factory, one line here.
  for (auto made : {make_python_runtime})
    if (std::unique_ptr<Runtime> r = made(services)) all_.push_back(std::move(r));
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

void Runtimes::read_stack(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> event) {
  for (auto& r : all_) r->read_stack(pid, kernel_maps, event);
}

void Runtimes::place_frames(pid_t pid, std::span<const Mapping> kernel_maps, std::span<const uint8_t> event,
                            uint16_t fn, std::vector<uint64_t>& ips) {
  for (auto& r : all_) r->place_frames(pid, kernel_maps, event, fn, ips);
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
