// Writes a flame graph of a fixed set of stacks, for the browser test and
// for looking at the output: flamegraph_demo OUT.svg [flame|icicle|diff|deep].
// deep: stacks 80 frames deep (a Python program's), taller than a screen.
// The numbers are chosen so that shares are round: handle_request is 1/3 of
// the total, main 5/6.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "output/flamegraph.h"

using allocscope::FlameStack;

namespace {

constexpr double kKiB = 1024;

std::vector<FlameStack> demo_stacks() {
  const std::vector<std::string> top = {"demo (4242)", "_start", "__libc_start_main", "main"};
  auto in_main = [&](std::vector<std::string> rest, double value, double base, std::string note = "") {
    std::vector<std::string> frames = top;
    frames.insert(frames.end(), rest.begin(), rest.end());
    return FlameStack{frames, value, base, note};
  };
  std::vector<FlameStack> stacks = {
      in_main({"load_table", "std::vector<std::pair<int, std::string>>::reserve(unsigned long)",
               "operator new(unsigned long)", "malloc"},
              300 * kKiB, 200 * kKiB, "95% CI [270 KiB; 330 KiB]"),
      in_main({"load_table", "parse_row(char const*)", "strdup", "malloc"}, 100 * kKiB, 100 * kKiB),
      in_main({"handle_request", "Buffer::grow(unsigned long)", "realloc"}, 250 * kKiB, 400 * kKiB),
      in_main({"handle_request", "json::parse<char const*>(char const*, char const*)",
               "operator new(unsigned long)", "malloc"},
              150 * kKiB, 150 * kKiB),
      in_main({"cache_insert", "calloc"}, 200 * kKiB - 4000, 100 * kKiB),
      {{"demo (4242)", "start_thread", "worker_loop", "libz.so.1+0x3f20", "malloc"}, 200 * kKiB, 200 * kKiB},
  };
  // Too narrow to draw (8 B of 1.2 MiB): they merge into one block under main.
  for (int i = 0; i < 500; ++i)
    stacks.push_back(in_main({"tiny_helper_" + std::to_string(i), "malloc"}, 8, 8));
  return stacks;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.svg [flame|icicle|diff]\n", argv[0]);
    return 2;
  }
  std::string mode = argc > 2 ? argv[2] : "flame";
  std::vector<FlameStack> stacks = demo_stacks();
  if (mode == "deep")
    for (FlameStack& s : stacks)
      for (int i = 0; i < 80; ++i) s.frames.insert(s.frames.begin() + 2, "frame_" + std::to_string(i));
  allocscope::FlameOptions o;
  o.title = "allocscope: alloc_space";
  o.subtitle = "demo stacks, rate 512 KiB, 30.0 s, total 1.2 MiB";
  o.icicle = mode == "icicle";
  o.diff = mode == "diff";
  std::ofstream out(argv[1], std::ios::binary);
  out << allocscope::render_flamegraph(stacks, o);
  return out.good() ? 0 : 1;
}
