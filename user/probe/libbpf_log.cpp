#include "probe/libbpf_log.h"

#include <bpf/libbpf.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace allocscope {
namespace {

std::atomic<bool> g_verbose{false};
std::mutex g_mutex;
std::string* g_kept = nullptr;  // under g_mutex

int print_libbpf(enum libbpf_print_level, const char* fmt, va_list args) {
  {
    std::lock_guard lock(g_mutex);
    if (g_kept) {
      va_list copy;
      va_copy(copy, args);
      char buf[1024];
      int n = std::vsnprintf(buf, sizeof buf, fmt, copy);
      va_end(copy);
      if (n > 0) g_kept->append(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
    }
  }
  if (!g_verbose.load(std::memory_order_relaxed)) return 0;
  return std::vfprintf(stderr, fmt, args);
}

}  // namespace

bool set_libbpf_verbose(bool verbose) {
  libbpf_set_print(print_libbpf);
  return g_verbose.exchange(verbose);
}

LibbpfCapture::LibbpfCapture() {
  libbpf_set_print(print_libbpf);
  std::lock_guard lock(g_mutex);
  delete g_kept;
  g_kept = new std::string;
}

LibbpfCapture::~LibbpfCapture() {
  std::lock_guard lock(g_mutex);
  delete g_kept;
  g_kept = nullptr;
}

std::string LibbpfCapture::text() const {
  std::lock_guard lock(g_mutex);
  return g_kept ? *g_kept : std::string();
}

VerifierRefusal verifier_refusal(std::string_view messages) {
  VerifierRefusal r;
  constexpr std::string_view kFailed = "': BPF program load failed", kBegin = "-- BEGIN PROG LOAD LOG --",
                             kProcessed = "processed ";
  size_t failed = messages.find(kFailed);
  if (failed == std::string_view::npos) return r;
  size_t quote = messages.rfind('\'', failed - 1);
  if (quote != std::string_view::npos)
    r.program = std::string(messages.substr(quote + 1, failed - quote - 1));
  size_t begin = messages.find(kBegin, failed);
  if (begin == std::string_view::npos) return r;
  // The last line of the log before its statistics ("processed N insns").
  std::string_view last;
  for (size_t at = messages.find('\n', begin) + 1; at != 0 && at < messages.size();) {
    size_t end = messages.find('\n', at);
    std::string_view line =
        messages.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    if (line.starts_with(kProcessed) || line.find("-- END PROG LOAD LOG --") != std::string_view::npos) break;
    // A function verified on its own is news of success, not a reason.
    if (!line.empty() && line.find("is safe for any args") == std::string_view::npos) last = line;
    at = end == std::string_view::npos ? 0 : end + 1;
  }
  r.reason = std::string(last);
  return r;
}

VerifierStats parse_verifier_stats(std::string_view log) {
  VerifierStats s;
  constexpr std::string_view kProcessed = "processed ", kDepth = "stack depth ";
  if (size_t at = log.find(kProcessed); at != std::string_view::npos)
    s.insns = std::strtoull(std::string(log.substr(at + kProcessed.size(), 20)).c_str(), nullptr, 10);
  size_t at = log.find(kDepth);
  if (at == std::string_view::npos) return s;
  std::string_view rest = log.substr(at + kDepth.size());
  rest = rest.substr(0, rest.find('\n'));
  for (size_t start = 0; start <= rest.size();) {
    size_t plus = rest.find('+', start);
    std::string_view part =
        rest.substr(start, plus == std::string_view::npos ? std::string_view::npos : plus - start);
    s.stack_depths.push_back(uint32_t(std::strtoul(std::string(part).c_str(), nullptr, 10)));
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  return s;
}

}  // namespace allocscope
