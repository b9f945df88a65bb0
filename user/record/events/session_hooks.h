// The sink's hooks that the BPF session and its unwind tables answer: the
// kernel's state of samples, and walks the kernel left unfinished.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "probe/session/bpf_session.h"
#include "probe/tables/table_loader.h"
#include "record/events/sink_hooks.h"
#include "symbols/symbolizer.h"

namespace allocscope {

class BpfKernelState : public KernelState {
 public:
  explicit BpfKernelState(BpfSession& session) : session_(session) {}

  void forget_live(uint32_t tgid, std::span<const uint64_t> addrs) override {
    session_.live().forget(tgid, addrs);
  }
  std::vector<ExactEntry> exact_totals(std::span<const uint64_t> ids) override {
    return session_.live().exact_totals(ids);
  }
  void forget_exact(std::span<const uint64_t> ids) override { session_.live().forget_exact(ids); }
  void release_held(uint32_t tgid, uint64_t stamp) override { session_.release_held(tgid, stamp); }
  void forget_file(uint32_t dev, uint64_t ino) override { session_.files().forget(dev, ino); }

 private:
  BpfSession& session_;
};

// Tables are built when the kernel asks; a walk it stopped is finished here
// with the process's newest mappings.
class SessionUnwind : public UnwindTables {
 public:
  // `with_tables`: the kernel unwinds with tables (--unwind dwarf).
  SessionUnwind(TableLoader& tables, Symbolizer& symbolizer, bool with_tables)
      : tables_(tables), symbolizer_(symbolizer), with_tables_(with_tables) {}

  void need_table(uint32_t tgid, const as_vma& vma) override;
  void on_exec(uint32_t tgid, uint32_t dev, uint64_t ino) override {
    tables_.pin_executable(pid_t(tgid), {.ino = ino, .dev = dev, .pad = 0});
  }
  void prepare_process(uint32_t tgid, std::function<void()> then) override {
    // The process waits meanwhile: a very large file (tens of megabytes of
    // code take a second or more to read) is left to the kernel's request.
    constexpr uint64_t kMaxBytesWhileHeld = 64 << 20;
    if (with_tables_)
      tables_.load_process_later(pid_t(tgid), kMaxBytesWhileHeld, std::move(then));
    else
      then();
  }
  int finish_walk(uint32_t tgid, const as_deferred_walk& walk, std::span<const uint8_t> stack,
                  std::vector<uint64_t>& ips, bool may_wait) override;
  bool tables_built() const override { return tables_.builds_finished(); }
  void collect_tables() override { tables_.collect(); }
  void wait_for_walks(uint32_t tgid, uint64_t max_ms) override;

 private:
  TableLoader& tables_;
  Symbolizer& symbolizer_;
  bool with_tables_;
  std::unordered_map<uint32_t, std::vector<as_file_key>> waits_;  // per process: files its walks wait for
};

}  // namespace allocscope
