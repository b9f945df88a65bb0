#include "probe/libbpf_log.h"

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace allocscope {
namespace {

std::atomic<bool> g_verbose{false};

int print_libbpf(enum libbpf_print_level, const char* fmt, va_list args) {
  if (!g_verbose.load(std::memory_order_relaxed)) return 0;
  return std::vfprintf(stderr, fmt, args);
}

}  // namespace

bool set_libbpf_verbose(bool verbose) {
  libbpf_set_print(print_libbpf);
  return g_verbose.exchange(verbose);
}

}  // namespace allocscope
