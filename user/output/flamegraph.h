// A self-contained flame graph SVG: frames, tooltips, colours by frame kind
// or by growth, and an embedded script for zoom and search. No external
// tools, no network: the file works when opened directly in a browser.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace allocscope {

enum class FrameKind { Process, Program, Library, Allocator, Other };

struct FlameStack {
  std::vector<std::string> frames;    // root first
  double value = 0;                   // bytes or objects; negative counts as 0
  double base = 0;                    // diff mode: the value in the base profile
  std::string note = {};              // optional extra tooltip line for the leaf ("95% CI [a; b]")
  bool significant = true;            // diff mode: its change is beyond sampling noise (only such colour)
  std::vector<FrameKind> kinds = {};  // per frame, from what holds its code; empty: guessed by name
};

struct FlameOptions {
  std::string title;           // "allocscope: alloc_space"
  std::string subtitle;        // "rate 512 KiB, 30.0 s, total 1.2 GiB"
  std::string unit = "bytes";  // "bytes" (printed with format_bytes) or "objects" (plain counts)
  bool icicle = false;         // root at the top
  // A graph taller than a screen (kScreenHeight) drawn root at the top too,
  // so that its first screen shows the root and the widest frames.
  bool icicle_when_tall = true;
  bool diff = false;  // colour by value against base: red grows, blue shrinks, grey flat
                      // (only the change of stacks marked significant colours)
  int width = 1200;   // pixels
};

// depth 0 is the process; allocator entry points, shared-object offsets
// ("libfoo.so.1+0x1a2b") and well-known libc/libstdc++ functions by name;
// "[unknown]"-like frames are Other; everything else is the program's code.
FrameKind default_kind(std::string_view frame, size_t depth);

// The fill ("#rrggbb") a frame of this kind and name has in the flame graph:
// other pages that draw frames (the timeline's) use the same.
std::string frame_fill(FrameKind kind, std::string_view name);

// Equal prefixes merge into one frame; siblings are ordered by name, so the
// same stacks give the same bytes whatever their order. Frames narrower than
// 0.1 px (or beyond a budget of frames that keeps big profiles responsive)
// are merged into one grey block per parent, which keeps their value and the
// names inside it for search.
std::string render_flamegraph(
    const std::vector<FlameStack>& stacks, const FlameOptions& o,
    const std::function<FrameKind(std::string_view frame, size_t depth)>& kind = default_kind);

}  // namespace allocscope
