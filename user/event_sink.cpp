#include "event_sink.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "process.h"

namespace allocscope {
namespace {

// The kernel's dev_t: major in the high 12 bits, minor in the low 20.
Mapping kernel_mapping(const as_vma& v) {
  Mapping m;
  m.start = v.start;
  m.end = v.end;
  m.offset = v.ino ? v.pgoff : 0;  // as /proc shows anonymous memory
  m.dev_major = v.dev >> 20;
  m.dev_minor = v.dev & 0xfffff;
  m.inode = v.ino;
  m.readable = m.executable = true;
  return m;
}

std::string comm_of(const char (&comm)[AS_COMM_LEN]) { return std::string(comm, strnlen(comm, AS_COMM_LEN)); }

// Binaries of exited processes: the path the symbolizer learned, which it
// checked to be the same file.
std::string file_for_unwinding(pid_t pid, const Mapping& m) {
  std::string path = mapped_file_path(pid, m);
  return access(path.c_str(), R_OK) == 0 ? path : m.path;
}

}  // namespace

EventSink::EventSink(Profile& profile, Symbolizer& symbolizer, UnwindMode mode, SinkPolicy policy)
    : profile_(profile), symbolizer_(symbolizer), mode_(mode), policy_(std::move(policy)),
      unwinder_(file_for_unwinding) {}

void EventSink::operator()(std::span<const uint8_t> data) {
  uint32_t kind;
  if (data.size() < sizeof kind)
    return;
  std::memcpy(&kind, data.data(), sizeof kind);
  if (kind == AS_EV_ALLOC) {
    on_alloc(data);
  } else if (kind == AS_EV_FREE && data.size() >= sizeof(as_event)) {
    as_event e;
    std::memcpy(&e, data.data(), sizeof e);
    if (auto id = processes_.find(e.tgid))
      profile_.on_free(*id, e.addr, e.ts_ns);
  } else if (kind >= AS_EV_FORK && kind <= AS_EV_MMAP && data.size() >= sizeof(as_proc_event)) {
    as_proc_event e;
    std::memcpy(&e, data.data(), sizeof e);
    on_process(e);
  }
}

// The instance a sample of `tgid` belongs to; nullopt when filtered out.
std::optional<uint32_t> EventSink::instance_for(uint32_t tgid, const std::string& comm) {
  bool made;
  uint32_t id = processes_.current(tgid, comm, &made);
  if (made) {  // first sample: judge it, and read its mappings while it lives
    if (policy_.accept && !policy_.accept(tgid, comm)) {
      processes_.reject(id);
      if (policy_.reject)
        policy_.reject(tgid);
    } else {
      symbolizer_.refresh(pid_t(tgid));
    }
  }
  if (processes_.instance(id).rejected)
    return std::nullopt;
  return id;
}

void EventSink::on_alloc(std::span<const uint8_t> data) {
  if (data.size() < sizeof(as_alloc_event))
    return;
  const auto* raw = reinterpret_cast<const as_alloc_event*>(data.data());
  as_event e;
  std::memcpy(&e, &raw->hdr, sizeof e);
  char comm_raw[AS_COMM_LEN];
  std::memcpy(comm_raw, raw->comm, sizeof comm_raw);
  std::string comm = comm_of(comm_raw);
  auto id = instance_for(e.tgid, comm);
  if (!id) {
    forget_untracked(e.tgid, e.addr, e.flags);
    return;
  }
  uint32_t nvmas;
  std::memcpy(&nvmas, &raw->nvmas, sizeof nvmas);
  kernel_maps_.clear();
  for (uint32_t i = 0; i < std::min<uint32_t>(nvmas, AS_MAX_VMAS); ++i) {
    as_vma v;
    std::memcpy(&v, &raw->vmas[i], sizeof v);
    kernel_maps_.push_back(kernel_mapping(v));
  }
  symbolizer_.add_mappings(pid_t(e.tgid), kernel_maps_);
  size_t nframes = std::min<size_t>(e.nframes, AS_MAX_FRAMES);
  ips_.resize(nframes);
  std::memcpy(ips_.data(), data.data() + offsetof(as_alloc_event, frames), nframes * sizeof(uint64_t));
  if ((e.flags & AS_EVF_SNAPSHOT) && mode_ != UnwindMode::Fp)
    unwind(e.tgid, data.subspan(sizeof(as_alloc_event)));
  size_t before = profile_.stacks().size();
  ProfileCounters counted = profile_.counters();
  profile_.on_alloc({.pid = *id,
                     .fn = e.fn,
                     .addr = e.addr,
                     .size = e.size,
                     .offset = e.offset,
                     .ts_ns = e.ts_ns,
                     .live_tracked = !(e.flags & (AS_EVF_LIVE_DROPPED | AS_EVF_UNTRACKED)),
                     .ips = ips_});
  if (profile_.stacks().size() != before)
    origins_.push_back(origin(e.tgid, comm, e.fn));
  const ProfileCounters& now = profile_.counters();
  bool table_full = now.stacks_full != counted.stacks_full, user_live_full = now.live_full != counted.live_full;
  if (table_full || user_live_full)
    forget_untracked(e.tgid, e.addr, e.flags);
  count_drops(e.tgid, comm, (e.flags & AS_EVF_LIVE_DROPPED) || user_live_full, e.flags & AS_EVF_STACK_FAILED,
              table_full);
}

// A sample the kernel tracks live but this side does not (filtered out, or a
// table full): its kernel entry would outlive the process.
void EventSink::forget_untracked(uint32_t tgid, uint64_t addr, uint16_t flags) {
  if (!(flags & (AS_EVF_LIVE_DROPPED | AS_EVF_UNTRACKED)) && policy_.forget_live)
    policy_.forget_live(tgid, std::span<const uint64_t>(&addr, 1));
}

StackOrigin EventSink::origin(uint32_t tgid, const std::string& comm, uint16_t fn) {
  StackOrigin o;
  o.pid = policy_.per_process ? tgid : 0;
  o.comm = comm;
  o.mappings = symbolizer_.resolve(pid_t(tgid), ips_);
  o.allocator_addr = policy_.allocator_address ? policy_.allocator_address(tgid, fn) : 0;
  if (o.allocator_addr)
    o.allocator_mapping = symbolizer_.resolve_address(pid_t(tgid), o.allocator_addr);
  return o;
}

void EventSink::count_drops(uint32_t tgid, const std::string& comm, bool live_full, bool stack_read,
                            bool table_full) {
  if (!live_full && !stack_read && !table_full)
    return;
  constexpr size_t kMaxProcesses = 4096;  // beyond: counted in the totals only
  if (drops_.size() >= kMaxProcesses && !drops_.contains(tgid))
    return;
  ProcessDrops& d = drops_[tgid];
  d.comm = comm;
  d.live_full += live_full;
  d.stack_read += stack_read;
  d.stack_table_full += table_full;
}

void EventSink::end_instance(uint32_t tgid, bool exited) {
  auto id = processes_.end(tgid);
  if (id && processes_.instance(*id).rejected && policy_.unreject)
    policy_.unreject(tgid, exited);
  symbolizer_.forget(pid_t(tgid));
  unwinder_.forget(pid_t(tgid));
  if (!id)
    return;
  // A root that exits keeps what it never freed; memory of a program
  // replaced by exec, or of any other process that exits, is released.
  if (exited && policy_.keeps_live_at_exit && policy_.keeps_live_at_exit(tgid))
    return;
  std::vector<uint64_t> addrs = profile_.drop_process(*id);
  if (!addrs.empty() && policy_.forget_live)
    policy_.forget_live(tgid, addrs);
}

std::string EventSink::last_name(uint32_t tgid) const {
  auto it = last_names_.find(tgid);
  return it == last_names_.end() ? "" : it->second;
}

void EventSink::on_process(const as_proc_event& e) {
  if (e.kind == AS_EV_EXEC || e.kind == AS_EV_EXIT) {
    constexpr size_t kMaxNames = 4096;  // only the drop report asks; forget the oldest batch
    if (last_names_.size() >= kMaxNames)
      last_names_.clear();
    last_names_[e.tgid] = comm_of(e.comm);
  }
  switch (e.kind) {
    case AS_EV_EXEC:
      end_instance(e.tgid, false);
      symbolizer_.track(pid_t(e.tgid));  // the new program's file, while it runs
      if (policy_.on_exec)
        policy_.on_exec(e.tgid);
      break;
    case AS_EV_EXIT:
      end_instance(e.tgid, true);
      break;
    case AS_EV_MMAP:
      if (policy_.new_library)
        policy_.new_library(e);
      break;
    default:
      break;
  }
}

void EventSink::unwind(uint32_t pid, std::span<const uint8_t> rest) {
  as_stack_snapshot raw;
  if (rest.size() < sizeof raw)
    return;
  std::memcpy(&raw, rest.data(), sizeof raw);
  StackSnapshot snap;
  std::copy(std::begin(raw.regs), std::end(raw.regs), snap.regs);
  snap.sp = raw.sp;
  snap.stack = rest.subspan(sizeof raw, std::min<size_t>(raw.len, rest.size() - sizeof raw));
  UnwindResult u = unwinder_.unwind(pid_t(pid), symbolizer_.maps(pid_t(pid)), snap);
  if (u.truncated && u.stop_reason.find("no mapping") != std::string::npos) {  // dlopen since
    symbolizer_.refresh(pid_t(pid));
    u = unwinder_.unwind(pid_t(pid), symbolizer_.maps(pid_t(pid)), snap);
  }
  ++unwinds_;
  truncated_ += u.truncated;
  if (mode_ == UnwindMode::Auto && u.ips.size() < ips_.size())
    return;
  ips_ = std::move(u.ips);
  if (u.truncated)
    ips_.push_back(kTruncatedFrame);
}

}  // namespace allocscope
