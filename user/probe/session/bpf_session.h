// The loaded BPF programs and their links: the only code that talks to libbpf.
#pragma once

#include <sys/types.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "allocscope.h"
#include "base/mapped_memory.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "probe/libbpf_log.h"
#include "probe/modes.h"
#include "probe/placement/allocator_probes.h"
#include "probe/session/file_marks.h"
#include "probe/session/hold_guard.h"
#include "probe/session/kernel_map.h"
#include "probe/session/live_maps.h"
#include "probe/session/process_maps.h"
#include "probe/tables/table_host.h"

struct allocscope_bpf;
struct bpf_link;
struct ring_buffer;

namespace allocscope {

struct SessionConfig {
  uint64_t rate = 0;
  uint32_t max_live = 0;
  uint32_t live_share = 0;     // live entries one process may hold; 0: no share
  uint32_t ringbuf_bytes = 0;  // power of two, multiple of the page size
  ProbeMode mode = ProbeMode::Auto;
  bool null_probes = false;       // programs that return at once: the overhead floor
  bool no_free = false;           // alloc-only: free is not probed
  bool unwind_tables = true;      // unwind with loaded CFI tables; false: frame pointers only
  uint32_t max_stacks = 1 << 18;  // exact mode: capacity of the per-stack totals
  uint32_t max_tables = 4096;     // unwind tables (files) the kernel can hold
  bool verbose = false;           // libbpf's own messages
  // System-wide probes (attach with pid 0): the `processes` map decides who
  // is traced. Per-process probes ignore these.
  bool filter_processes = false;
  bool trace_unknown = false;    // processes without a verdict are traced (--all)
  bool follow_children = false;  // members' children become members at fork
  uint64_t cgroup_id = 0;        // traced only inside this cgroup (with cgroup_level > 0)
  uint32_t cgroup_level = 0;
  uint32_t max_processes = 1 << 16;  // capacity of the process verdict table
  bool pausable = false;             // pause_probes() and resume_probes() are used (a file held per attach)
  // A process mapping a file not seen before is stopped until release_held()
  // (HoldGuard): the file is probed before the process runs any of it.
  bool hold_new_files = false;
  // Filters by name (--comm) or unit (--unit): their judgements apply in the
  // kernel to every later process of the name (set_name_verdict).
  bool judge_names = false, judge_cgroups = false;
  // cgroup_mkdir events (AS_EV_CGROUP): cgroups named after they are gone.
  bool cgroup_names = false;
  bool verifier_stats = false;  // keep each program's verifier statistics (verifier_stats())
  // Allocating calls that trap are counted per recorded process (take_busy()).
  bool count_busy = false;
};

struct KernelFeatures;

using Counters = std::array<uint64_t, AS_CNT_COUNT>;

class BpfSession final : public TableHost {
 public:
  using Handler = std::function<bool(std::span<const uint8_t>)>;

  static Result<std::unique_ptr<BpfSession>> open(const SessionConfig& config, Handler handler);
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;
  ~BpfSession();

  // Probes `targets` of the library at `library_path` (a path the kernel can
  // open, e.g. through /proc/PID/root) in process `pid` only, or in every
  // process that maps the file when pid is 0.
  Result<void> attach(pid_t pid, const std::string& library_path, const std::vector<ProbeTarget>& targets);
  // Probes the in-process sampling USDT probes (otel_memory:alloc and
  // :free, or the preload library's twins) of the object at `path`, in
  // process `pid` or (0) every process. Returns the provider attached.
  // `releasable`: its links are kept apart, for release_in_process (a copy
  // of the library that one entry loaded; never paused: entries are not
  // made under --duty).
  Result<const char*> attach_in_process(pid_t pid, const std::string& path, bool releasable = false);
  // The probes attach_in_process made releasable at these paths, detached
  // together (each waits for the kernel's grace periods).
  void release_in_process(std::span<const std::string> paths);
  // The kernel's maps by family, each behind a typed handle: the table of
  // processes (verdicts, in-process marks, judgements by name, busy and
  // dropped counts), what it knows of files, and the live samples with
  // exact mode's totals.
  ProcessMaps& processes() { return *processes_; }
  const ProcessMaps& processes() const { return *processes_; }
  FileMarks& files() { return *files_; }
  LiveMaps& live() { return *live_; }
  // A map of the BPF object by its name (a runtime's, bpf/python.bpf.h's),
  // typed; fails when there is none of that name, or its key or value has
  // another size.
  template <typename Key, typename Value>
  Result<KernelMap<Key, Value>> typed_map(const std::string& name) const {
    auto m = map_named(name, sizeof(Key), sizeof(Value));
    if (!m) return fail(m.error());
    return KernelMap<Key, Value>(std::move(*m));
  }
  // Continues a process the kernel stopped (an event's `held`), if that hold
  // (the event's `hold` stamp) still holds it: false when it did not.
  bool release_held(uint32_t tgid, uint64_t stamp);
  // Continues those held since before `before_ns` (CLOCK_MONOTONIC): their
  // event was lost or is late; those in `waiting` (for tables being built)
  // only when held since before `waiting_before_ns`. Their ids, appended to `pids`.
  size_t release_held_before(uint64_t before_ns, const std::unordered_set<uint32_t>& waiting = {},
                             uint64_t waiting_before_ns = 0, std::vector<uint32_t>* pids = nullptr);
  // How long the processes continued so far were held (the last 4,096).
  const RecentDurations& hold_times() const { return hold_times_; }
  // Loads the unwind table of the file the kernel's mappings name `key`
  // (replacing one it had) and clears the kernel's request for it.
  Result<void> load_unwind_table(const as_file_key& key, std::span<const as_unwind_row> rows) override;
  bool has_unwind_table(const as_file_key& key) const;
  // Process `pid`'s executable file mappings as the kernel's walks name
  // their files (/proc/PID/maps may name an overlay's file instead of the
  // one mapped below it); nullopt when the kernel could not list them.
  std::optional<std::vector<as_vma>> code_mappings(pid_t pid) const override;
  // Forgets the kernel's request for a table (it asks again at the next use).
  void forget_table_request(const as_file_key& key) override;
  // Removes every probe (entry probes first, so no call is left half-seen).
  void detach();
  // Duty cycle: removes the allocator and in-process probes (the process
  // lifecycle stays seen) and puts them back. Files attached meanwhile are
  // probed at resume. Each file is held open, so it is found again after
  // the process whose path named it has gone; a per-process probe whose
  // process has gone is dropped. Resume returns the probes it could not
  // put back.
  void pause_probes();
  size_t resume_probes();
  bool paused() const { return paused_; }

  // Ends a wait() in progress (or the next one) at once; from any thread.
  void wake() override;
  // Ends the first wait() after `fd` becomes readable (a target's pidfd,
  // when it exits: the kernel's exit event comes before the process can be
  // reaped, and the loop then waited out a whole wait). Once per fd.
  Result<void> wake_once_readable(int fd);
  // Waits up to timeout_ms for events (or a wake).
  Result<void> wait(int timeout_ms);
  // Delivers the pending events to the handler. The handler returning false
  // stops the delivery before the end (a reader that lags still gets
  // control back): `stopped`. `events` counts that last one too.
  struct Delivered {
    int events = 0;
    bool stopped = false;
  };
  Result<Delivered> deliver();
  // The ring buffer's positions, in bytes: up to where events were placed
  // (reserved, maybe not yet committed), and up to where they were read.
  // Read at or past a placed position, every event placed before it was read.
  uint64_t events_placed() const;
  uint64_t events_read() const;
  Counters counters() const;
  // With SessionConfig::verifier_stats: each loaded program's, by name.
  const std::vector<std::pair<std::string, VerifierStats>>& verifier_stats() const { return stats_; }
  ProbeMode mode() const { return mode_; }
  // What the kernel was found to have (kernel_features()).
  const KernelFeatures& kernel() const { return *kernel_; }
  // The paths this session takes, named for a recording (Recording::paths):
  // kernel, probes, unwind, and the fallbacks among them.
  std::vector<std::pair<std::string, std::string>> paths() const;

 private:
  BpfSession() = default;
  struct SkeletonCloser {
    void operator()(allocscope_bpf* s) const;
  };
  struct RingCloser {
    void operator()(ring_buffer* r) const;
  };
  struct LinkCloser {
    void operator()(bpf_link* l) const;
  };
  using Link = std::unique_ptr<bpf_link, LinkCloser>;

  Result<MapHandle> map_named(const std::string& name, size_t key_size, size_t value_size) const;
  void configure_programs();
  Result<void> make_waker();
  Result<void> attach_lifecycle();
  Result<void> attach_session(pid_t pid, const std::string& path, const std::vector<ProbeTarget>& targets);
  Result<void> attach_classic(pid_t pid, const std::string& path, const std::vector<ProbeTarget>& targets);
  Result<void> attach_now(pid_t pid, const std::string& path, const std::vector<ProbeTarget>& targets);
  // The object whose programs probe `targets`' Go entries: the Go programs'
  // (load_go_programs), the session's own without Go entries (or for their
  // null programs).
  Result<allocscope_bpf*> go_programs_for(const std::vector<ProbeTarget>& targets);
  // The Go programs, loaded at the first Go program probed (go_programs.cpp);
  // a refusal is kept and told again, not verified again.
  Result<allocscope_bpf*> load_go_programs();
  Result<const char*> attach_in_process_now(pid_t pid, const std::string& path,
                                            std::vector<Link>* into = nullptr);
  Result<void> remember(pid_t pid, const std::string& path, std::vector<ProbeTarget> targets,
                        bool in_process);

  // What was attached, to attach again after a pause (empty targets: the
  // in-process probes).
  struct Attached {
    pid_t pid;
    UniqueFd file;  // O_PATH: attached again as /proc/self/fd/N
    std::vector<ProbeTarget> targets;
    bool in_process;
  };
  std::vector<Attached> attached_;
  bool paused_ = false;

  // Declared in the order of creation: members go in reverse, links (and
  // with them the probes) before the maps and programs they use.
  SessionConfig config_;
  ProbeMode mode_ = ProbeMode::Classic;
  const KernelFeatures* kernel_ = nullptr;
  std::unique_ptr<allocscope_bpf, SkeletonCloser> skel_;
  // load_go_programs(). Its global data is the session's maps, read and
  // written through skel_ alone (since libbpf 1.5 its own pointers are
  // private copies of them).
  std::unique_ptr<allocscope_bpf, SkeletonCloser> go_skel_;
  std::optional<Error> go_refusal_;
  Handler handler_;
  uint64_t handed_ = 0;  // events handed to handler_
  // libbpf's callback: the handler's refusal stops its delivery loop with
  // kStopDelivery (a negative return), which deliver() tells apart.
  static constexpr int kStopDelivery = -EINTR;
  static int on_event(void* ctx, void* data, size_t size);
  std::unique_ptr<ring_buffer, RingCloser> ring_;
  UniqueFd wake_fd_, epoll_;     // wait() waits on both
  MappedMemory ring_positions_;  // the ring buffer's consumer and producer pages
  MappedMemory live_filter_;     // the kernel's live filter, mapped here
  std::optional<ProcessMaps> processes_;
  std::optional<FileMarks> files_;
  std::optional<LiveMaps> live_;
  // BTF types of the unwind tables' template (libbpf frees it at load).
  uint32_t table_btf_key_ = 0, table_btf_value_ = 0;
  std::unique_ptr<HoldGuard> hold_guard_;  // with hold_new_files
  RecentDurations hold_times_{4096};
  std::vector<Link> lifecycle_links_;
  std::vector<Link> entry_links_, return_links_;
  std::map<std::string, std::vector<Link>> releasable_links_;  // by the path attached
  std::vector<UniqueFd> raw_links_;  // links made with bpf(2) directly, unknown to this libbpf
  std::vector<std::pair<std::string, VerifierStats>> stats_;
};

}  // namespace allocscope
