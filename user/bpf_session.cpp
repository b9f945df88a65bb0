#include "bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "allocscope.skel.h"
#include "sampling.h"

namespace allocscope {
namespace {

bool g_verbose = false;

int print_libbpf(enum libbpf_print_level level, const char* fmt, va_list args) {
  (void)level;
  if (!g_verbose)  // failures are reported by us, with context
    return 0;
  return std::vfprintf(stderr, fmt, args);
}

std::string privilege_hint(int err) {
  if (err == EPERM || err == EACCES)
    return " (allocscope needs root, or CAP_BPF and CAP_PERFMON: try sudo)";
  return "";
}

bpf_program* entry_program(allocscope_bpf* s, as_fn fn) {
  switch (fn) {
    case AS_FN_MALLOC: return s->progs.malloc_enter;
    case AS_FN_CALLOC: return s->progs.calloc_enter;
    case AS_FN_REALLOC: return s->progs.realloc_enter;
    case AS_FN_REALLOCARRAY: return s->progs.reallocarray_enter;
    case AS_FN_POSIX_MEMALIGN: return s->progs.posix_memalign_enter;
    case AS_FN_ALIGNED_ALLOC: return s->progs.aligned_alloc_enter;
    case AS_FN_MEMALIGN: return s->progs.memalign_enter;
    case AS_FN_VALLOC: return s->progs.valloc_enter;
    case AS_FN_PVALLOC: return s->progs.pvalloc_enter;
    case AS_FN_FREE: return s->progs.free_enter;
    case AS_FN_COUNT: break;
  }
  return nullptr;
}

int on_event(void* ctx, void* data, size_t size) {
  auto* handler = static_cast<BpfSession::Handler*>(ctx);
  (*handler)({static_cast<const uint8_t*>(data), size});
  return 0;
}

}  // namespace

void BpfSession::LinkCloser::operator()(bpf_link* l) const { bpf_link__destroy(l); }

Result<std::unique_ptr<BpfSession>> BpfSession::open(const SessionConfig& config, Handler handler) {
  g_verbose = config.verbose;
  libbpf_set_print(print_libbpf);
  std::unique_ptr<BpfSession> s(new BpfSession());
  s->handler_ = std::move(handler);
  s->skel_ = allocscope_bpf__open();
  if (!s->skel_)
    return fail(errno_message("open BPF object", errno));
  s->skel_->rodata->sample_rate = config.rate;
  Log2Table table = make_log2_table();
  for (size_t i = 0; i < table.size(); ++i)
    s->skel_->rodata->log2_table[i] = table[i];
  bpf_map__set_max_entries(s->skel_->maps.live, config.max_live);
  bpf_map__set_max_entries(s->skel_->maps.events, config.ringbuf_bytes);
  if (int err = allocscope_bpf__load(s->skel_); err != 0)
    return fail(errno_message("load BPF programs", -err) + privilege_hint(-err));
  s->ring_ = ring_buffer__new(bpf_map__fd(s->skel_->maps.events), on_event, &s->handler_, nullptr);
  if (!s->ring_)
    return fail(errno_message("create ring buffer", errno));
  return s;
}

BpfSession::~BpfSession() {
  detach();
  if (ring_)
    ring_buffer__free(ring_);
  if (skel_)
    allocscope_bpf__destroy(skel_);
}

Result<void> BpfSession::attach(pid_t pid, const std::string& library_path,
                                const std::vector<ProbeTarget>& targets) {
  // Return probes first: an entry seen without its return would leave the
  // thread's nesting depth raised and stop its sampling.
  for (bool retprobe : {true, false}) {
    for (const ProbeTarget& t : targets) {
      if (retprobe && t.fn == AS_FN_FREE)
        continue;
      bpf_program* prog = retprobe ? skel_->progs.alloc_return : entry_program(skel_, t.fn);
      bpf_link* link = bpf_program__attach_uprobe(prog, retprobe, pid, library_path.c_str(), t.offset);
      if (!link) {
        int err = errno;
        std::string what = std::string("attach ") + (retprobe ? "uretprobe " : "uprobe ") +
                           fn_name(t.fn) + " (" + library_path + ") to process " + std::to_string(pid);
        if (err == ESRCH || err == ENOENT)
          return fail(what + ": the process exited");
        return fail(errno_message(what, err) + privilege_hint(err));
      }
      (retprobe ? return_links_ : entry_links_).emplace_back(link);
    }
  }
  return {};
}

void BpfSession::detach() {
  entry_links_.clear();
  return_links_.clear();
}

Result<int> BpfSession::poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n < 0 && n != -EINTR)
    return fail(errno_message("poll ring buffer", -n));
  return n < 0 ? 0 : n;
}

Counters BpfSession::counters() const {
  Counters total{};
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(ncpu > 0 ? ncpu : 1);
  for (uint32_t i = 0; i < AS_CNT_COUNT; ++i) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &i, values.data()) != 0)
      continue;
    for (uint64_t v : values)
      total[i] += v;
  }
  return total;
}

}  // namespace allocscope
