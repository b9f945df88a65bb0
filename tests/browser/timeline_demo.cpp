// Writes a timeline page of a fixed recording, for the browser test and for
// looking at the output: timeline_demo OUT.html. Exact mode, two sites:
//   t=0    site_a allocates 1000            live 1000
//   t=100  site_b allocates 3000            live 4000 (the highest)
//   t=200  site_a frees 1000, allocates 500 live 3500
//   t=300  site_b frees 3000                live 500
// so point 1 shows 3000 at site_b and 1000 at site_a, and the range 1-3
// allocated 500, all at site_a.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "model/profile.h"
#include "model/timeline.h"
#include "output/timeline.h"

using namespace allocscope;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: timeline_demo OUT.html\n");
    return 2;
  }
  Profile p(1, 16, 1024);
  Timeline tl;
  std::vector<uint64_t> a = {0x401000}, b = {0x402000};
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x10, .size = 1000, .ips = a});
  tl.observe(0, p);
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x20, .size = 3000, .ips = b});
  tl.observe(100, p);
  p.on_free(1, 0x10);
  p.on_alloc({.pid = 1, .fn = 0, .addr = 0x30, .size = 500, .ips = a});
  tl.observe(200, p);
  p.on_free(1, 0x20);
  tl.observe(300, p);
  std::vector<TimelineStack> stacks = {{{"demo (1)", "main", "site_a", "malloc"}, {}},
                                       {{"demo (1)", "main", "site_b", "malloc"}, {}}};
  TimelineOptions o;
  o.subtitle = "exact (--rate 1), 0.3 s";
  std::ofstream(argv[1]) << render_timeline(tl, stacks, o);
  return 0;
}
