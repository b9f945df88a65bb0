// The sink's side of process lifecycle events: a program that ends (exit,
// or exec of another) has its instance retired; a new one is judged.
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/clocks.h"
#include "record/events/agent_records.h"
#include "record/events/event_sink.h"
#include "runtime/registry.h"

namespace allocscope {

void EventSink::end_instance(uint32_t tgid, bool exited, bool in_process) {
  auto id = processes_.end(tgid, in_process, now_ms());
  if (id && processes_.instance(*id).rejected) hooks_.verdicts.unreject(tgid, exited);
  if (id && !processes_.instance(*id).rejected) hooks_.verdicts.unaccept(tgid, exited);
  symbolizer_.forget(pid_t(tgid));
  if (runtimes_) runtimes_->forget(pid_t(tgid));
  if (!id) return;
  // A root that exits keeps what it never freed; memory of a program
  // replaced by exec, or of any other process that exits, is released.
  bool keep = exited && hooks_.verdicts.keeps_live_at_exit(tgid);
  bool kernel_totals = profile_.rate() <= 1 && kernel_totals_;
  if (kernel_totals) finish_exact(*id, keep);
  if (!keep) {
    std::vector<uint64_t> addrs = profile_.drop_process(*id);
    if (!addrs.empty()) hooks_.kernel.forget_live(tgid, addrs);
  }
  // The kernel never names an ended instance's stacks again (ids cover the
  // instance); exact mode keeps a root's, whose totals are read at the end.
  if (!keep || !kernel_totals) {
    if (auto ids = instance_stacks_.find(*id); ids != instance_stacks_.end()) {
      for (uint64_t s : ids->second) stacks_.erase(s);
      instance_stacks_.erase(ids);
    }
  }
}

std::vector<uint64_t> EventSink::hand_over_live(uint32_t tgid) {
  auto id = processes_.find(tgid);
  if (!id) return {};
  return profile_.hand_over_live(*id);
}

void EventSink::end_hand_over(uint32_t tgid, std::span<const uint64_t> addrs, bool taken) {
  if (addrs.empty()) return;
  if (taken) {
    hooks_.kernel.forget_live(tgid, addrs);  // those whose free the probe has not seen meanwhile
  } else if (auto id = processes_.find(tgid)) {
    profile_.hand_back_live(*id, addrs);
  }
}

void EventSink::forget_probed_live(uint32_t tgid) {
  auto id = processes_.find(tgid);
  if (!id) return;
  std::vector<uint64_t> addrs = profile_.drop_process(*id);
  if (!addrs.empty()) hooks_.kernel.forget_live(tgid, addrs);
}

size_t EventSink::count_probed_between(uint32_t tgid, uint64_t from_ns, uint64_t to_ns) {
  auto id = processes_.find(tgid);
  size_t n = id ? profile_.kernel_held_between(*id, from_ns, to_ns) : 0;
  entry_frees_unseen_ += n;
  return n;
}

size_t EventSink::end_vanished(const std::function<bool(uint32_t)>& alive, bool drained) {
  // Gone twice in a row: an exit event merely not read yet would have been
  // read in between (the reader drains the ring buffer every tick).
  std::unordered_map<uint32_t, uint32_t> gone;
  size_t ended = 0;
  for (auto [tgid, id] : processes_.running_instances()) {
    if (alive(tgid)) continue;
    if (auto seen = vanishing_.find(tgid); !drained && (seen == vanishing_.end() || seen->second != id)) {
      gone.emplace(tgid, id);
      continue;
    }
    end_instance(tgid, true, false);
    ++ended;
  }
  vanishing_ = std::move(gone);
  ended_unseen_ += ended;
  return ended;
}

// A stack of a later program than the instance's (its exec event was lost:
// the ring buffer was full), or of a later process with its pid (so was its
// exit): the instance ends as that event would have ended it, so that
// neither shares its samples, mappings or live memory with the other. An
// earlier program's stack (none should follow its exec) stays with it.
bool EventSink::end_if_replaced(uint32_t id, const StackEvent& head) {
  const ProcessInstance& p = processes_.instance(id);
  // An agent's stack (written in the process: the JVM's) knows not the
  // kernel's names of the instance, which is the one current; an instance
  // an agent's stack made takes them from the first stack that has them.
  if (!head.agent.empty()) return false;
  if (p.start_ns == 0 && p.exec_id == AgentRecords::kAgentExec) {
    processes_.set_start(id, head.ns_tgid, head.start_ns, head.exec_id);
    return false;
  }
  bool other_process = p.start_ns != head.start_ns;
  if (!other_process && p.exec_id >= head.exec_id) return false;
  uint32_t tgid = p.tgid;
  end_instance(tgid, other_process, false);
  ++ended_by_stacks_;
  // As on_exec does, for what it can without the event (the new instance's
  // mappings are read where it is made).
  hooks_.libraries.on_program_end(tgid);
  if (!other_process) hooks_.libraries.on_exec(tgid);
  return true;
}

// ALLOCSCOPE_TEST_LOSE_EXECS=1 takes every exec event for one the ring
// buffer lost, as the kernel then leaves it (not held, its file not marked
// seen): the tests prove with it that programs are told apart by stacks.
// Only in builds with tests (ALLOCSCOPE_TEST_HOOKS, user/CMakeLists.txt).
bool EventSink::lost_for_test([[maybe_unused]] const as_proc_event& exec) {
#ifndef ALLOCSCOPE_TEST_HOOKS
  return false;
#else
  static const bool lose = std::getenv("ALLOCSCOPE_TEST_LOSE_EXECS") != nullptr;
  if (!lose) return false;
  if (exec.held) {
    hooks_.kernel.forget_file(exec.dev, exec.ino);
    hooks_.kernel.release_held(exec.tgid, exec.hold);
  }
  return true;
#endif
}

std::string EventSink::last_name(uint32_t tgid) const {
  auto it = last_names_.find(tgid);
  return it == last_names_.end() ? "" : it->second;
}

// A process ran a new program: the one it replaced ends, and the new one is
// judged by name (the kernel then decides its samples itself). Held as a
// file not seen before, it goes on once its tables are in, or at once if
// its name rules it out: a filter's others are never stopped for it.
void EventSink::on_exec(const as_proc_event& e) {
  end_instance(e.tgid, false, e.ended & AS_ENDED_IN_PROCESS);
  hooks_.libraries.on_program_end(e.tgid);
  // Outside --cgroup, or of a name rejected before: the kernel neither
  // samples nor held it, and nothing of it is examined.
  if (e.ruled_out) return;
  if (hooks_.verdicts.judge_name(e.tgid, comm_of(e.comm))) {
    // Nothing of it will be sampled: its files are not examined for it.
    if (e.held) {
      hooks_.kernel.release_held(e.tgid, e.hold);
      hooks_.kernel.forget_file(e.dev, e.ino);  // the next process that may be sampled is held for it
    }
    return;
  }
  symbolizer_.track(pid_t(e.tgid));  // the new program's file, while it runs
  // A file seen before was examined then: its mappings are not read again
  // (recording the whole machine, the kernel does not even wake the reader
  // for it: the start of a known program pays nothing for allocscope).
  if (e.fresh) hooks_.libraries.on_exec(e.tgid);
  hooks_.unwind.on_exec(e.tgid, e.dev, e.ino);
  // The runtimes read (or set) what the program holds before it goes on, when held.
  if (runtimes_) runtimes_->on_program(pid_t(e.tgid), e.dev, e.ino);
  if (e.held) release_when_prepared(e);
}

void EventSink::release_when_prepared(const as_proc_event& e) {
  hooks_.unwind.prepare_process(
      e.tgid, [this, tgid = e.tgid, stamp = e.hold] { hooks_.kernel.release_held(tgid, stamp); });
}

void EventSink::on_process(const as_proc_event& e) {
  if (e.kind == AS_EV_EXEC || e.kind == AS_EV_EXIT) {
    constexpr size_t kMaxNames = 4096;  // only the drop report asks; forget the oldest batch
    if (last_names_.size() >= kMaxNames) last_names_.clear();
    last_names_[e.tgid] = comm_of(e.comm);
  }
  switch (e.kind) {
    case AS_EV_EXEC:
      on_exec(e);
      break;
    case AS_EV_EXIT:
      end_instance(e.tgid, true, e.ended & AS_ENDED_IN_PROCESS);
      hooks_.libraries.on_program_end(e.tgid);
      break;
    case AS_EV_FORK:
      hooks_.libraries.on_fork(e.parent, e.tgid);
      break;
    case AS_EV_MMAP:
      hooks_.libraries.new_library(e);
      if (runtimes_)
        runtimes_->on_mapping(pid_t(e.tgid), e.addr,
                              std::string_view(e.name, strnlen(e.name, sizeof e.name)));
      if (e.held)  // stopped by the kernel until its new file is probed and its tables are in
        release_when_prepared(e);
      break;
    default:
      break;
  }
}

std::vector<uint32_t> EventSink::fold_stacks(const std::unordered_map<uint32_t, uint32_t>& into) {
  std::vector<std::optional<Profile::FoldTo>> moves(profile_.stacks().size());
  for (uint32_t i = 0; i < moves.size(); ++i) {
    auto to = into.find(profile_.stacks()[i].pid);
    if (to == into.end()) continue;
    auto [stack, origin] = folded_stack(i, to->second);
    moves[i] = std::move(stack);
    origins_[i] = std::move(origin);
  }
  std::vector<uint32_t> remap = profile_.fold(moves);
  forget_stacks(remap);
  return remap;
}

std::pair<Profile::FoldTo, StackOrigin> EventSink::folded_stack(uint32_t stack, uint32_t into) {
  const StackRecord& s = profile_.stacks()[stack];
  StackOrigin o = origins_[stack];
  Profile::FoldTo to{into, s.ips};
  // Each address as it is at its file's own base (Symbolizer::at_file_base).
  auto move = [this](uint64_t& addr, uint32_t& mapping) {
    const Mapping* m = symbolizer_.mapping(mapping);
    if (!m || !m->is_file()) return;
    uint64_t offset = addr - m->start;
    mapping = symbolizer_.at_file_base(mapping);
    addr = symbolizer_.mapping(mapping)->start + offset;
  };
  for (size_t f = 0; f < to.ips.size() && f < o.mappings.size(); ++f)
    if (!Symbolizer::is_runtime_frame(to.ips[f]) && to.ips[f] != kTruncatedFrame)
      move(to.ips[f], o.mappings[f]);
  if (o.allocator_addr) move(o.allocator_addr, o.allocator_mapping);
  o.pid = o.ns_pid = 0;  // no process: the program's
  o.comm = processes_.instance(into).comm;
  return {std::move(to), std::move(o)};
}

}  // namespace allocscope
