// A sampled stack of a CPython program with its Python frames in place:
// each native frame of the evaluation loop gives way to the Python frames
// that call of the loop ran (C extensions' frames stay where they are).
// Pure logic.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace allocscope {

struct PlacedPythonFrame {
  uint64_t ip = 0;         // the frame as a stack value (Symbolizer::runtime_frame); 0: not shown
  bool call_root = false;  // the outermost frame of its call of the evaluation loop
};

struct PythonPlacement {
  std::vector<uint64_t> ips;
  // Python frames with no loop frame left to stand in for (the native
  // walk stopped short, or a loop frame was not recognized): placed at the
  // outer end, before a truncation mark.
  size_t unplaced = 0;
};

// `native`: innermost first, perhaps ending in kTruncatedFrame (0);
// `is_loop[i]`: native[i] is a frame of the evaluation loop. `python`:
// innermost first.
PythonPlacement place_python_frames(std::span<const uint64_t> native, const std::vector<bool>& is_loop,
                                    std::span<const PlacedPythonFrame> python);

}  // namespace allocscope
