// Links released all at once. The kernel removes a uprobe only after RCU
// grace periods (tens of milliseconds each on 6.12+): released one after
// another, a few links made every recording's end wait a visible time, and
// on a kernel without uprobe_multi (one link per entry point) seconds.
// Released from several threads, they wait for the same grace periods.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <system_error>
#include <thread>
#include <vector>

namespace allocscope {

// Runs `tasks` on up to `max_threads` threads, this one among them.
inline void run_in_parallel(const std::vector<std::function<void()>>& tasks, size_t max_threads = 32) {
  size_t slices = std::clamp<size_t>(tasks.size(), 1, max_threads);
  auto run_slice = [&tasks, slices](size_t s) {
    for (size_t i = s; i < tasks.size(); i += slices) tasks[i]();
  };
  std::vector<std::thread> pool;
  size_t s = 1;  // slice 0 runs here
  try {
    for (; s < slices; ++s) pool.emplace_back(run_slice, s);
  } catch (const std::system_error&) {  // no thread to be had: the rest here too
  }
  for (size_t rest = s; rest < slices; ++rest) run_slice(rest);
  run_slice(0);
  for (std::thread& t : pool) t.join();
}

// Resets every element of every vector at once, then empties them.
template <typename... Vectors>
void release_in_parallel(Vectors&... vectors) {
  std::vector<std::function<void()>> tasks;
  (
      [&] {
        for (auto& item : vectors) tasks.push_back([&item] { item.reset(); });
      }(),
      ...);
  run_in_parallel(tasks);
  (vectors.clear(), ...);
}

}  // namespace allocscope
