#include "runtime/python/placement.h"

namespace allocscope {
namespace {

// The frames of one call of the loop, from `next` on; advances `next`.
void take_call(std::span<const PlacedPythonFrame> python, size_t& next, std::vector<uint64_t>& out,
               size_t* shown) {
  while (next < python.size()) {
    const PlacedPythonFrame& f = python[next++];
    if (f.ip) {
      out.push_back(f.ip);
      if (shown) ++*shown;
    }
    if (f.call_root) return;
  }
}

}  // namespace

PythonPlacement place_python_frames(std::span<const uint64_t> native, const std::vector<bool>& is_loop,
                                    std::span<const PlacedPythonFrame> python) {
  PythonPlacement p;
  size_t next = 0;
  bool truncated = !native.empty() && native.back() == 0;
  size_t n = native.size() - (truncated ? 1 : 0);
  for (size_t i = 0; i < n; ++i) {
    if (i < is_loop.size() && is_loop[i] && next < python.size())
      take_call(python, next, p.ips, nullptr);
    else
      p.ips.push_back(native[i]);
  }
  while (next < python.size()) take_call(python, next, p.ips, &p.unplaced);
  if (truncated) p.ips.push_back(0);
  return p;
}

}  // namespace allocscope
