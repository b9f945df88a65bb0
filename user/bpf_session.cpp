#include "bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "allocscope.skel.h"
#include "sampling.h"
#include "unique_fd.h"
#include "unwind_step.h"
#include "unwind_table.h"

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
  if ((err == EPERM || err == EACCES) && geteuid() != 0)
    return " (allocscope needs root, or CAP_BPF and CAP_PERFMON: try sudo)";
  if (err == EACCES) return " (the kernel's verifier refused a program: -v prints its log)";
  return "";
}

// Attach types this libbpf predates (values from the kernel's UAPI).
constexpr uint32_t kTraceUprobeMulti = 48;    // BPF_TRACE_UPROBE_MULTI, 6.6
constexpr uint32_t kTraceUprobeSession = 57;  // BPF_TRACE_UPROBE_SESSION, 6.13
constexpr int kLinkCreate = 28;               // BPF_LINK_CREATE

// bpf_attr for BPF_LINK_CREATE of a uprobe_multi or session link.
struct UprobeMultiAttr {
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid;
};

int create_uprobe_multi_link(int prog_fd, uint32_t attach_type, const std::string& path,
                             const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& cookies,
                             pid_t pid) {
  UprobeMultiAttr attr{};
  attr.prog_fd = uint32_t(prog_fd);
  attr.attach_type = attach_type;
  attr.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.cnt = uint32_t(offsets.size());
  attr.pid = uint32_t(pid);
  return int(syscall(__NR_bpf, kLinkCreate, &attr, sizeof attr));
}

bpf_program* entry_program(allocscope_bpf* s, as_fn fn) {
  switch (fn) {
    case AS_FN_MALLOC:
      return s->progs.malloc_enter;
    case AS_FN_CALLOC:
      return s->progs.calloc_enter;
    case AS_FN_REALLOC:
      return s->progs.realloc_enter_classic;
    case AS_FN_REALLOCARRAY:
      return s->progs.reallocarray_enter;
    case AS_FN_POSIX_MEMALIGN:
      return s->progs.posix_memalign_enter;
    case AS_FN_ALIGNED_ALLOC:
      return s->progs.aligned_alloc_enter;
    case AS_FN_MEMALIGN:
      return s->progs.memalign_enter;
    case AS_FN_VALLOC:
      return s->progs.valloc_enter;
    case AS_FN_PVALLOC:
      return s->progs.pvalloc_enter;
    case AS_FN_FREE:
      return s->progs.free_enter;
    case AS_FN_COUNT:
      break;
  }
  return nullptr;
}

// A negative return stops libbpf's delivery loop; poll() tells it apart.
constexpr int kStopDelivery = -EINTR;

int on_event(void* ctx, void* data, size_t size) {
  auto* handler = static_cast<BpfSession::Handler*>(ctx);
  return (*handler)({static_cast<const uint8_t*>(data), size}) ? 0 : kStopDelivery;
}

}  // namespace

void BpfSession::LinkCloser::operator()(bpf_link* l) const { bpf_link__destroy(l); }

void BpfSession::FdCloser::operator()(int* fd) const {
  close(*fd);
  delete fd;
}

bool kernel_has_uprobe_sessions() {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  bool found = false;
  int id = btf__find_by_name_kind(vmlinux, "bpf_attach_type", BTF_KIND_ENUM);
  if (id > 0) {
    const btf_type* t = btf__type_by_id(vmlinux, id);
    const struct btf_enum* e = btf_enum(t);
    for (int i = 0; i < btf_vlen(t) && !found; ++i)
      found = std::string(btf__name_by_offset(vmlinux, e[i].name_off)) == "BPF_TRACE_UPROBE_SESSION";
  }
  btf__free(vmlinux);
  return found;
}

const char* probe_mode_name(ProbeMode m) {
  switch (m) {
    case ProbeMode::Auto:
      return "auto";
    case ProbeMode::Session:
      return "session";
    case ProbeMode::Classic:
      return "classic";
  }
  return "?";
}

// Loads only the programs this mode attaches, with the attach types the
// kernel checks at load.
Result<void> BpfSession::configure_programs() {
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) bpf_program__set_autoload(prog, false);
  auto enable = [](bpf_program* p, uint32_t attach_type) {
    bpf_program__set_autoload(p, true);
    if (attach_type) bpf_program__set_expected_attach_type(p, static_cast<bpf_attach_type>(attach_type));
  };
  auto& p = skel_->progs;
  if (mode_ == ProbeMode::Session) {
    enable(config_.null_probes ? p.null_session : p.alloc_session, kTraceUprobeSession);
    if (!config_.null_probes) enable(p.malloc_session, kTraceUprobeSession);
    if (!config_.no_free) enable(config_.null_probes ? p.null_multi : p.free_multi, kTraceUprobeMulti);
  } else if (config_.null_probes) {
    enable(p.null_classic, 0);
  } else {
    for (int fn = 0; fn < AS_FN_COUNT; ++fn)
      if (fn != AS_FN_FREE || !config_.no_free) enable(entry_program(skel_, static_cast<as_fn>(fn)), 0);
    enable(p.alloc_return, 0);
  }
  if (!config_.null_probes) {  // the floor measures the allocator probes alone
    for (bpf_program* lifecycle : {p.on_fork, p.on_exec, p.on_exit}) enable(lifecycle, 0);
    if (config_.filter_processes) enable(p.on_syscall_exit, 0);
  }
  return {};
}

Result<void> BpfSession::attach_lifecycle() {
  auto& p = skel_->progs;
  for (bpf_program* prog : {p.on_fork, p.on_exec, p.on_exit, p.on_syscall_exit}) {
    if (!bpf_program__autoload(prog)) continue;
    bpf_link* link = bpf_program__attach(prog);
    if (!link)
      return fail(errno_message(std::string("attach ") + bpf_program__name(prog), errno) +
                  privilege_hint(errno));
    lifecycle_links_.emplace_back(link);
  }
  return {};
}

Result<std::unique_ptr<BpfSession>> BpfSession::open(const SessionConfig& config, Handler handler) {
  g_verbose = config.verbose;
  libbpf_set_print(print_libbpf);
  std::unique_ptr<BpfSession> s(new BpfSession());
  s->handler_ = std::move(handler);
  s->config_ = config;
  bool sessions = kernel_has_uprobe_sessions();
  if (config.mode == ProbeMode::Session && !sessions)
    return fail("uprobe sessions need kernel 6.13 or newer; use --probe-mode classic");
  s->mode_ =
      config.mode == ProbeMode::Auto ? (sessions ? ProbeMode::Session : ProbeMode::Classic) : config.mode;
  s->skel_ = allocscope_bpf__open();
  if (!s->skel_) return fail(errno_message("open BPF object", errno));
  s->configure_programs();
  s->skel_->rodata->use_sessions = s->mode_ == ProbeMode::Session;
  s->skel_->rodata->sample_rate = config.rate;
  s->skel_->rodata->wakeup_bytes = config.ringbuf_bytes / 4;
  s->skel_->rodata->use_tables = config.unwind_tables;
  s->skel_->rodata->frame_pointer_rule = as_frame_pointer_row();
  s->skel_->rodata->track_live = !config.no_free;
  s->skel_->rodata->filter_processes = config.filter_processes;
  s->skel_->rodata->trace_unknown = config.trace_unknown;
  s->skel_->rodata->follow_children = config.follow_children;
  s->skel_->rodata->cgroup_id = config.cgroup_id;
  s->skel_->rodata->cgroup_level = config.cgroup_level;
  bpf_map__set_max_entries(s->skel_->maps.processes, config.max_processes);
  Log2Table table = make_log2_table();
  for (size_t i = 0; i < table.size(); ++i) s->skel_->rodata->log2_table[i] = table[i];
  bpf_map__set_max_entries(s->skel_->maps.live, config.max_live);
  bpf_map__set_max_entries(s->skel_->maps.exact_totals, config.max_stacks);
  bpf_map__set_max_entries(s->skel_->maps.unwind_tables, config.max_tables);
  bpf_map__set_max_entries(s->skel_->maps.events, config.ringbuf_bytes);
  if (int err = allocscope_bpf__load(s->skel_); err != 0)
    return fail(errno_message("load BPF programs", -err) + privilege_hint(-err));
  s->ring_ = ring_buffer__new(bpf_map__fd(s->skel_->maps.events), on_event, &s->handler_, nullptr);
  if (!s->ring_) return fail(errno_message("create ring buffer", errno));
  if (auto ok = s->attach_lifecycle(); !ok) return fail(ok.error());
  s->live_filter_bytes_ = size_t(bpf_map__max_entries(s->skel_->maps.live_filter)) * AS_LIVE_FILTER_STRIDE;
  void* filter = mmap(nullptr, s->live_filter_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED,
                      bpf_map__fd(s->skel_->maps.live_filter), 0);
  if (filter == MAP_FAILED) return fail(errno_message("map the live filter", errno));
  s->live_filter_ = static_cast<uint8_t*>(filter);
  return s;
}

BpfSession::~BpfSession() {
  detach();
  if (live_filter_) munmap(live_filter_, live_filter_bytes_);
  if (ring_) ring_buffer__free(ring_);
  if (skel_) allocscope_bpf__destroy(skel_);
}

Result<void> BpfSession::attach(pid_t pid, const std::string& library_path,
                                const std::vector<ProbeTarget>& targets) {
  std::vector<ProbeTarget> wanted;
  for (const ProbeTarget& t : targets)
    if (t.fn != AS_FN_FREE || !config_.no_free) wanted.push_back(t);
  return mode_ == ProbeMode::Session ? attach_session(pid, library_path, wanted)
                                     : attach_classic(pid, library_path, wanted);
}

namespace {

std::string attach_error(const std::string& what, pid_t pid, int err) {
  if (err == ESRCH || err == ENOENT)
    return what + " to process " + std::to_string(pid) + ": the process exited";
  if (err == EINVAL)  // the kernel logs "ref_ctr_offset mismatch" in dmesg then
    return errno_message(what + " to process " + std::to_string(pid), err) +
           " (another tool, e.g. BCC's memleak, may hold a probe at the same address with a different "
           "reference counter: stop it and retry)";
  return errno_message(what + " to process " + std::to_string(pid), err) + privilege_hint(err);
}

}  // namespace

// A session link for malloc, one for the other allocating entry points
// (cookie = enum as_fn) and a uprobe_multi link for free.
Result<void> BpfSession::attach_session(pid_t pid, const std::string& path,
                                        const std::vector<ProbeTarget>& targets) {
  std::vector<uint64_t> offsets, cookies, malloc_offsets, malloc_cookies, free_offsets, free_cookies;
  for (const ProbeTarget& t : targets) {
    bool own = t.fn == AS_FN_FREE || t.fn == AS_FN_MALLOC;
    auto& o = t.fn == AS_FN_FREE ? free_offsets : own ? malloc_offsets : offsets;
    auto& c = t.fn == AS_FN_FREE ? free_cookies : own ? malloc_cookies : cookies;
    o.push_back(t.offset);
    c.push_back(t.fn);
  }
  auto& p = skel_->progs;
  struct Part {
    bpf_program* prog;
    uint32_t type;
    const std::vector<uint64_t>& offsets;
    const std::vector<uint64_t>& cookies;
    const char* what;
  };
  Part parts[] = {
      {config_.null_probes ? p.null_session : p.malloc_session, kTraceUprobeSession, malloc_offsets,
       malloc_cookies, "malloc session probe"},
      {config_.null_probes ? p.null_session : p.alloc_session, kTraceUprobeSession, offsets, cookies,
       "allocator session probes"},
      {config_.null_probes ? p.null_multi : p.free_multi, kTraceUprobeMulti, free_offsets, free_cookies,
       "free probe"},
  };
  std::vector<RawLink> made;  // all or nothing: free without malloc's links, or the reverse, would mislead
  for (const Part& part : parts) {
    if (part.offsets.empty()) continue;
    int fd = create_uprobe_multi_link(bpf_program__fd(part.prog), part.type, path, part.offsets, part.cookies,
                                      pid);
    if (fd < 0) return fail(attach_error(std::string("attach ") + part.what + " (" + path + ")", pid, errno));
    made.emplace_back(new int(fd));
  }
  for (RawLink& l : made) raw_links_.push_back(std::move(l));
  return {};
}

Result<void> BpfSession::attach_classic(pid_t pid, const std::string& path,
                                        const std::vector<ProbeTarget>& targets) {
  // Return probes first: an entry seen without its return would leave the
  // thread's nesting depth raised and stop its sampling.
  for (bool retprobe : {true, false}) {
    if (retprobe && config_.null_probes) continue;
    for (const ProbeTarget& t : targets) {
      if (retprobe && t.fn == AS_FN_FREE) continue;
      bpf_program* prog = config_.null_probes ? skel_->progs.null_classic
                          : retprobe          ? skel_->progs.alloc_return
                                              : entry_program(skel_, t.fn);
      bpf_link* link = bpf_program__attach_uprobe(prog, retprobe, pid ? pid : -1, path.c_str(), t.offset);
      if (!link)
        return fail(attach_error(std::string("attach ") + (retprobe ? "uretprobe " : "uprobe ") +
                                     fn_name(t.fn) + " (" + path + ")",
                                 pid, errno));
      (retprobe ? return_links_ : entry_links_).emplace_back(link);
    }
  }
  return {};
}

void BpfSession::detach() {
  raw_links_.clear();
  entry_links_.clear();
  return_links_.clear();
  lifecycle_links_.clear();
}

Result<void> BpfSession::set_verdict(uint32_t tgid, uint8_t verdict) {
  int fd = bpf_map__fd(skel_->maps.processes);
  if (verdict == 0) {
    bpf_map_delete_elem(fd, &tgid);
    return {};
  }
  if (bpf_map_update_elem(fd, &tgid, &verdict, BPF_ANY) != 0)
    return fail(errno_message("set process verdict (raise --max-processes)", errno));
  return {};
}

void BpfSession::forget_live(uint32_t tgid, std::span<const uint64_t> addrs) {
  int fd = bpf_map__fd(skel_->maps.live);
  for (uint64_t addr : addrs) {
    as_live_key key{.tgid = tgid, .pad = 0, .addr = addr};
    if (bpf_map_delete_elem(fd, &key) != 0) continue;  // freed meanwhile: the kernel lowered the filter
    auto* slot =
        reinterpret_cast<uint32_t*>(live_filter_ + size_t(as_live_slot(tgid, addr)) * AS_LIVE_FILTER_STRIDE);
    __atomic_fetch_sub(slot, 1, __ATOMIC_RELAXED);
  }
}

void BpfSession::forget_live(std::span<const as_live_key> keys) {
  for (const as_live_key& k : keys) forget_live(k.tgid, std::span<const uint64_t>(&k.addr, 1));
}

Result<void> BpfSession::load_unwind_table(const as_file_key& key, std::span<const as_unwind_row> rows) {
  std::vector<as_unwind_row> table = kernel_layout(rows);
  uint32_t n = uint32_t(table.size());
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
  int fd =
      bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_rows", sizeof(uint32_t), sizeof(as_unwind_row), n, &opts);
  if (fd < 0) return fail(errno_message("create an unwind table of " + std::to_string(n) + " rows", errno));
  UniqueFd owner(fd);  // the outer map holds its own reference
  size_t bytes = size_t(n) * sizeof(as_unwind_row);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return fail(errno_message("map an unwind table", errno));
  std::memcpy(mem, table.data(), bytes);
  munmap(mem, bytes);
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.unwind_tables), &key, &fd, BPF_ANY) != 0)
    return fail(errno_message("load an unwind table (raise the table count)", errno));
  forget_table_request(key);
  return {};
}

bool BpfSession::has_unwind_table(const as_file_key& key) const {
  uint32_t id = 0;
  return bpf_map_lookup_elem(bpf_map__fd(skel_->maps.unwind_tables), &key, &id) == 0;
}

void BpfSession::forget_table_request(const as_file_key& key) {
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.table_requests), &key);
}

namespace {

// Every entry of a hash map, through get_next_key (the map may change under
// us: entries added meanwhile may be missed, deleted ones skipped).
template <typename K, typename V>
std::vector<std::pair<K, V>> all_entries(int fd) {
  std::vector<std::pair<K, V>> out;
  K key{}, next{};
  K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V value{};
    if (bpf_map_lookup_elem(fd, &next, &value) == 0) out.emplace_back(next, value);
    key = next;
    prev = &key;
  }
  return out;
}

}  // namespace

std::vector<std::pair<uint64_t, as_exact_totals>> BpfSession::exact_totals() const {
  return all_entries<uint64_t, as_exact_totals>(bpf_map__fd(skel_->maps.exact_totals));
}

std::vector<std::pair<uint64_t, as_exact_totals>> BpfSession::exact_totals(
    std::span<const uint64_t> ids) const {
  std::vector<std::pair<uint64_t, as_exact_totals>> out;
  for (uint64_t id : ids) {
    as_exact_totals t{};
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.exact_totals), &id, &t) == 0) out.emplace_back(id, t);
  }
  return out;
}

void BpfSession::forget_exact(std::span<const uint64_t> ids) {
  for (uint64_t id : ids) bpf_map_delete_elem(bpf_map__fd(skel_->maps.exact_totals), &id);
}

std::vector<std::pair<as_live_key, as_live_value>> BpfSession::live_entries() const {
  return all_entries<as_live_key, as_live_value>(bpf_map__fd(skel_->maps.live));
}

void BpfSession::forget_file(uint32_t kernel_dev, uint64_t ino) {
  as_file_key key{.ino = ino, .dev = kernel_dev, .pad = 0};
  bpf_map_delete_elem(bpf_map__fd(skel_->maps.known_files), &key);
}

std::vector<std::pair<uint32_t, uint64_t>> BpfSession::process_drops() const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  int fd = bpf_map__fd(skel_->maps.process_drops);
  uint32_t key, next;
  uint32_t* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    uint64_t n = 0;
    if (bpf_map_lookup_elem(fd, &next, &n) == 0) out.emplace_back(next, n);
    key = next;
    prev = &key;
  }
  return out;
}

Result<int> BpfSession::poll(int timeout_ms) {
  int n = ring_buffer__poll(ring_, timeout_ms);
  if (n == kStopDelivery) return 0;
  if (n < 0) return fail(errno_message("poll ring buffer", -n));
  // Events are mostly submitted without a wakeup: read what is there.
  int more = ring_buffer__consume(ring_);
  if (more == kStopDelivery) return n;
  if (more < 0) return fail(errno_message("read ring buffer", -more));
  return n + more;
}

Counters BpfSession::counters() const {
  Counters total{};
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> values(ncpu > 0 ? ncpu : 1);
  for (uint32_t i = 0; i < AS_CNT_COUNT; ++i) {
    if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &i, values.data()) != 0) continue;
    for (uint64_t v : values) total[i] += v;
  }
  return total;
}

}  // namespace allocscope
