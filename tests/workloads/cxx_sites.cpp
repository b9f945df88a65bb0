// C++ allocation sites built without frame pointers (-O2 -fomit-frame-pointer):
// `new`, std::vector growth and std::string growth, each reached through
// three levels of named functions from main. A frame-pointer walk from inside
// operator new loses these callers; DWARF unwinding finds them.
//   cxx_sites [--scale-pct P]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cxx_sites_spec.h"

namespace {

std::vector<std::unique_ptr<char[]>> g_kept;  // what the run keeps live: nothing at exit
volatile size_t g_sink;

}  // namespace

// Each site allocates a known number of times; see cxx_sites_spec.h.
__attribute__((noinline)) void cxx_site_new(unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    auto p = std::make_unique<char[]>(kNewSize);
    p[0] = char(i);
    g_sink = g_sink + size_t(p[0]);
  }
}

__attribute__((noinline)) void cxx_site_vector(unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    std::vector<long> v;
    v.reserve(kVectorElements);  // one allocation of kVectorElements * sizeof(long)
    v.push_back(long(i));
    g_sink = g_sink + v.size();
  }
}

__attribute__((noinline)) void cxx_site_string(unsigned n) {
  for (unsigned i = 0; i < n; ++i) {
    std::string s;
    s.reserve(kStringCapacity);  // one allocation of kStringCapacity + 1 bytes
    s.push_back('x');
    g_sink = g_sink + s.size();
  }
}

__attribute__((noinline)) void cxx_level3(unsigned scale) {
  cxx_site_new(kNewCount * scale / 100);
  cxx_site_vector(kVectorCount * scale / 100);
  cxx_site_string(kStringCount * scale / 100);
}
__attribute__((noinline)) void cxx_level2(unsigned scale) {
  cxx_level3(scale);
  g_sink = g_sink + 1;
}
__attribute__((noinline)) void cxx_level1(unsigned scale) {
  cxx_level2(scale);
  g_sink = g_sink + 1;
}

int main(int argc, char** argv) {
  unsigned scale = 100;
  if (argc == 3 && !std::strcmp(argv[1], "--scale-pct"))
    scale = unsigned(std::atoi(argv[2]));
  else if (argc != 1)
    return 2;
  cxx_level1(scale);
  std::printf("done %zu\n", g_kept.size());
  return 0;
}
