#include "record/events/events.h"

#include <algorithm>
#include <cstring>

namespace allocscope {
namespace {

template <typename T>
std::optional<T> read_as(std::span<const uint8_t> data) {
  if (data.size() < sizeof(T)) return std::nullopt;
  T v;
  std::memcpy(&v, data.data(), sizeof v);
  return v;
}

std::string comm_text(const char (&comm)[AS_COMM_LEN]) {
  return std::string(comm, strnlen(comm, AS_COMM_LEN));
}

std::optional<Event> decode_stack(std::span<const uint8_t> data) {
  // Sent without its unused runtime frames: at least up to them.
  constexpr size_t kRuntimePart = offsetof(as_stack_event, npy);
  if (data.size() < offsetof(as_stack_event, py)) return std::nullopt;
  const auto* raw = reinterpret_cast<const as_stack_event*>(data.data());
  as_stack_event head;
  std::memcpy(&head, raw, offsetof(as_stack_event, vmas));
  StackEvent s;
  s.tgid = head.tgid;
  s.ns_tgid = head.ns_tgid;
  s.fn = head.fn;
  s.stop = head.stop;
  s.id = head.id;
  s.cgroup = head.cgroup;
  s.start_ns = head.start_ns;
  s.exec_id = head.exec_id;
  s.comm = comm_text(head.comm);
  for (uint32_t i = 0; i < std::min<uint32_t>(head.nvmas, AS_MAX_VMAS); ++i) {
    as_vma v;
    std::memcpy(&v, &raw->vmas[i], sizeof v);
    s.mappings.push_back(kernel_mapping(v));
  }
  s.ips.resize(std::min<size_t>(head.nframes, AS_MAX_FRAMES));
  if (!s.ips.empty())  // memcpy from or to null is undefined
    std::memcpy(s.ips.data(), data.data() + offsetof(as_stack_event, frames),
                s.ips.size() * sizeof(uint64_t));
  size_t end = std::min(data.size(), sizeof(as_stack_event));
  s.runtime_part.assign(data.begin() + kRuntimePart, data.begin() + end);
  if (head.stop == AS_STOP_NO_TABLE && data.size() >= sizeof(as_stack_event) + sizeof(as_deferred_walk)) {
    as_deferred_walk walk;
    std::memcpy(&walk, data.data() + sizeof(as_stack_event), sizeof walk);
    auto stack = data.subspan(sizeof(as_stack_event) + sizeof walk);
    stack = stack.first(std::min<size_t>(walk.len, stack.size()));
    s.walk = walk;
    s.walk_stack.assign(stack.begin(), stack.end());
  }
  return s;
}

std::optional<Event> decode_alloc(std::span<const uint8_t> data) {
  auto a = read_as<as_alloc_event>(data);
  if (!a) return std::nullopt;
  const as_event& e = a->hdr;
  return AllocEvent{e.tgid, e.tid,  e.fn,     e.flags, e.ts_ns,
                    e.addr, e.size, e.offset, e.stack, comm_text(a->comm)};
}

std::optional<Event> decode_cgroup(std::span<const uint8_t> data, bool gone) {
  auto c = read_as<as_cgroup_event>(data);
  if (!c) return std::nullopt;
  return CgroupEvent{c->id, gone ? "" : std::string(c->path, std::min<size_t>(c->len, sizeof c->path)), gone};
}

}  // namespace

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

std::optional<Event> decode_kernel_event(std::span<const uint8_t> data) {
  uint32_t kind = 0;
  if (data.size() < sizeof kind) return std::nullopt;
  std::memcpy(&kind, data.data(), sizeof kind);
  switch (kind) {
    case AS_EV_STACK:
      return decode_stack(data);
    case AS_EV_ALLOC:
      return decode_alloc(data);
    case AS_EV_FREE:
      if (auto e = read_as<as_event>(data)) return FreeEvent{e->tgid, e->tid, e->ts_ns, e->addr};
      return std::nullopt;
    case AS_EV_CGROUP:
    case AS_EV_CGROUP_GONE:
      return decode_cgroup(data, kind == AS_EV_CGROUP_GONE);
    case AS_EV_NEED_TABLE:
      if (auto t = read_as<as_table_event>(data)) return TableNeeded{t->tgid, t->vma};
      return std::nullopt;
    case AS_EV_FORK:
    case AS_EV_EXEC:
    case AS_EV_EXIT:
    case AS_EV_MMAP:
    case AS_EV_EXITING:
      if (auto p = read_as<as_proc_event>(data)) return ProcessEvent{*p};
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<uint64_t> event_time(const Event& event) {
  if (const auto* a = std::get_if<AllocEvent>(&event)) return a->ts_ns;
  if (const auto* f = std::get_if<FreeEvent>(&event)) return f->ts_ns;
  if (const auto* p = std::get_if<ProcessEvent>(&event)) return p->e.ts_ns;
  return std::nullopt;
}

uint32_t event_process(const Event& event) {
  return std::visit(
      [](const auto& e) -> uint32_t {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, ProcessEvent>)
          return e.e.tgid;
        else if constexpr (std::is_same_v<T, CgroupEvent>)
          return 0;
        else
          return e.tgid;
      },
      event);
}

size_t event_bytes(const Event& event) {
  size_t extra = 0;
  if (const auto* s = std::get_if<StackEvent>(&event))
    extra = s->mappings.size() * sizeof(Mapping) + s->ips.size() * sizeof(uint64_t) + s->walk_stack.size() +
            s->runtime_part.size();
  return sizeof(Event) + extra;
}

}  // namespace allocscope
