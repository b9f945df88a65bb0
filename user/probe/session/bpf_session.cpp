#include "probe/session/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "allocscope.skel.h"
#include "allocscope_ctx.skel.h"
#include "base/unique_fd.h"
#include "probe/features/kernel_features.h"
#include "probe/features/probe_choice.h"
#include "probe/libbpf_log.h"
#include "probe/parallel_release.h"
#include "probe/placement/allocator_entries.h"
#include "probe/session/object_load.h"
#include "probe/session/programs.h"
#include "probe/skeleton_variant.h"
#include "probe/uprobe_links.h"
#include "stats/sampling.h"
#include "symbols/unwind_step.h"
#include "symbols/unwind_table.h"

namespace allocscope {

int BpfSession::on_event(void* ctx, void* data, size_t size) {
  auto* s = static_cast<BpfSession*>(ctx);
  ++s->handed_;  // libbpf has consumed it, whatever the handler says
  return s->handler_({static_cast<const uint8_t*>(data), size}) ? 0 : kStopDelivery;
}

void BpfSession::LinkCloser::operator()(bpf_link* l) const { bpf_link__destroy(l); }

void BpfSession::SkeletonCloser::operator()(allocscope_bpf* s) const { allocscope_bpf__destroy(s); }

void BpfSession::RingCloser::operator()(ring_buffer* r) const { ring_buffer__free(r); }

std::vector<std::pair<std::string, std::string>> BpfSession::paths() const {
  return kernel_paths(*kernel_, mode_, config_.mode, config_.unwind_tables);
}

// Loads only the programs this mode attaches; the Go programs wait for a
// Go program to probe (load_go_programs).
void BpfSession::configure_programs() { select_programs(skel_.get(), config_, mode_, false); }

Result<void> BpfSession::attach_lifecycle() {
  for (const ProgramUse& use : program_uses(skel_.get(), config_, mode_)) {
    if (!use.used || use.by != AttachedBy::Open) continue;
    bpf_link* link = bpf_program__attach(use.program);
    if (!link)
      return fail(errno_message(std::string("attach ") + bpf_program__name(use.program), errno) +
                      privilege_hint(errno),
                  errno);
    lifecycle_links_.emplace_back(link);
  }
  return {};
}

Result<std::unique_ptr<BpfSession>> BpfSession::open(const SessionConfig& config, Handler handler) {
  const KernelFeatures& kernel = kernel_features();
  set_libbpf_verbose(config.verbose);
  if (std::string why = missing_features_message(kernel); !why.empty())
    return fail(why, kernel.unprivileged() ? EPERM : 0);
  std::unique_ptr<BpfSession> s(new BpfSession());
  s->handler_ = std::move(handler);
  s->config_ = config;
  s->kernel_ = &kernel;
  auto mode = choose_probe_mode(kernel, config.mode);
  if (!mode) return fail(mode.error());
  s->mode_ = *mode;
  if (config.cgroup_level && !kernel.has(Feature::AncestorCgroup))
    return fail("--cgroup needs " + std::string(spec_of(Feature::AncestorCgroup).name) + " (Linux " +
                spec_of(Feature::AncestorCgroup).first_kernel + "), which this kernel (" + kernel.release +
                ") lacks");
  s->skel_.reset(open_skeleton(allocscope_bpf__create_skeleton, allocscope_bpf__destroy,
                               kernel.session_kfunc_takes_ctx ? allocscope_ctx_bpf__elf_bytes : nullptr));
  if (!s->skel_) return fail_errno("open BPF object", errno);
  s->configure_programs();
  s->skel_->rodata->use_sessions = s->mode_ == ProbeMode::Session;
  s->skel_->rodata->sample_rate = config.rate;
  s->skel_->rodata->wakeup_bytes = config.ringbuf_bytes / 4;
  s->skel_->rodata->use_tables = config.unwind_tables;
  s->skel_->rodata->frame_pointer_rule = as_frame_pointer_row();
  s->skel_->rodata->track_live = !config.no_free;
  s->skel_->rodata->live_share = config.live_share;
  s->skel_->rodata->filter_processes = config.filter_processes;
  s->skel_->rodata->owner_tgid = uint32_t(getpid());
  s->skel_->rodata->trace_unknown = config.trace_unknown;
  s->skel_->rodata->follow_children = config.follow_children;
  s->skel_->rodata->hold_new_files = config.hold_new_files;
  s->skel_->rodata->judge_names = config.judge_names;
  s->skel_->rodata->judge_cgroups = config.judge_cgroups;
  s->skel_->rodata->cgroup_id = config.cgroup_id;
  s->skel_->rodata->cgroup_level = config.cgroup_level;
  s->skel_->rodata->count_busy = config.count_busy;
  bpf_map__set_max_entries(s->skel_->maps.busy, config.max_processes);
  bpf_map__set_max_entries(s->skel_->maps.processes, config.max_processes);
  bpf_map__set_max_entries(s->skel_->maps.process_live, config.max_processes);
  Log2Table table = make_log2_table();
  for (size_t i = 0; i < table.size(); ++i) s->skel_->rodata->log2_table[i] = table[i];
  bpf_map__set_max_entries(s->skel_->maps.live, config.max_live);
  bpf_map__set_max_entries(s->skel_->maps.exact_totals, config.max_stacks);
  bpf_map__set_max_entries(s->skel_->maps.unwind_tables, config.max_tables);
  bpf_map__set_max_entries(s->skel_->maps.events, config.ringbuf_bytes);
  if (bpf_map* inner = bpf_map__inner_map(s->skel_->maps.unwind_tables)) {
    s->table_btf_key_ = bpf_map__btf_key_type_id(inner);
    s->table_btf_value_ = bpf_map__btf_value_type_id(inner);
  }
  if (auto loaded = load_object(s->skel_.get(), kernel.release, config.verifier_stats ? &s->stats_ : nullptr);
      !loaded)
    return fail(loaded.error());
  // check judges every program, the Go programs as recordings load them.
  if (config.verifier_stats)
    if (auto go = s->load_go_programs(); !go) return fail(go.error());
  s->ring_.reset(ring_buffer__new(bpf_map__fd(s->skel_->maps.events), on_event, s.get(), nullptr));
  if (!s->ring_) return fail_errno("create ring buffer", errno);
  if (auto ok = s->make_waker(); !ok) return fail(ok.error());
  if (config.hold_new_files) {  // before any process can be held
    auto guard = HoldGuard::start(bpf_map__fd(s->skel_->maps.held), bpf_map__fd(s->skel_->maps.hold_relays));
    if (!guard) return fail(guard.error());
    s->hold_guard_ = std::move(*guard);
  }
  if (auto ok = s->attach_lifecycle(); !ok) return fail(ok.error());
  auto filter = MappedMemory::map_shared(
      bpf_map__fd(s->skel_->maps.live_filter),
      size_t(bpf_map__max_entries(s->skel_->maps.live_filter)) * AS_LIVE_FILTER_STRIDE, "the live filter");
  if (!filter) return fail(filter.error());
  s->live_filter_ = std::move(*filter);
  const auto& m = s->skel_->maps;
  s->processes_.emplace(
      ProcessMaps::Fds{bpf_map__fd(m.processes), bpf_map__fd(m.name_verdicts), bpf_map__fd(m.unjudged_drops),
                       bpf_map__fd(m.process_drops), bpf_map__fd(m.busy)},
      config.judge_cgroups);
  s->files_.emplace(bpf_map__fd(m.known_files), bpf_map__fd(m.in_process_files));
  bpf_program* sweep = s->skel_->progs.sweep_live;
  s->live_.emplace(LiveMaps::Fds{bpf_map__fd(m.live), bpf_map__fd(m.exact_totals),
                                 bpf_program__autoload(sweep) ? bpf_program__fd(sweep) : -1},
                   reinterpret_cast<uint8_t*>(s->live_filter_.data()));
  return s;
}

BpfSession::~BpfSession() { detach(); }

Result<void> BpfSession::attach(pid_t pid, const std::string& library_path,
                                const std::vector<ProbeTarget>& targets) {
  std::vector<ProbeTarget> wanted;
  for (const ProbeTarget& t : targets) {
    as_fn kind = as_fn_kind(t.fn);
    // _exit holds processes: only where holding is on, never for the floor.
    bool exits = kind == AS_FN_EXIT && config_.hold_new_files && !config_.null_probes;
    bool frees = kind == AS_FN_FREE || kind == AS_FN_GO_FREE;
    if (kind == AS_FN_EXIT ? exits : !frees || !config_.no_free) wanted.push_back(t);
  }
  if (auto ok = remember(pid, library_path, wanted, false); !ok) return ok;
  if (!paused_)
    if (auto ok = attach_now(pid, library_path, wanted); !ok) {
      if (config_.pausable) attached_.pop_back();
      return ok;
    }
  return {};
}

Result<void> BpfSession::attach_now(pid_t pid, const std::string& path,
                                    const std::vector<ProbeTarget>& targets) {
  return mode_ == ProbeMode::Session ? attach_session(pid, path, targets)
                                     : attach_classic(pid, path, targets);
}

// A file not held could not be attached again after a pause: an error now,
// so that discovery counts it rather than believing it probed.
Result<void> BpfSession::remember(pid_t pid, const std::string& path, std::vector<ProbeTarget> targets,
                                  bool in_process) {
  if (!config_.pausable) return {};
  UniqueFd file(::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!file) return fail_errno("hold " + path + " for the duty cycle", errno);
  attached_.push_back({pid, std::move(file), std::move(targets), in_process});
  return {};
}

void BpfSession::pause_probes() {
  if (paused_) return;
  release_in_parallel(raw_links_, entry_links_);  // entry probes first, as in detach()
  release_in_parallel(return_links_);
  paused_ = true;
}

size_t BpfSession::resume_probes() {
  if (!paused_) return 0;
  paused_ = false;
  ++skel_->bss->probe_epoch;  // threads caught mid-call by the pause start afresh
  size_t lost = 0;
  std::erase_if(attached_, [&](const Attached& a) {
    std::string path = "/proc/self/fd/" + std::to_string(a.file.get());
    bool ok =
        a.in_process ? bool(attach_in_process_now(a.pid, path)) : bool(attach_now(a.pid, path, a.targets));
    lost += !ok;
    return !ok;
  });
  return lost;
}

namespace {

Error attach_error(const std::string& what, pid_t pid, int err) {
  if (err == ESRCH || err == ENOENT)
    return {what + " to process " + std::to_string(pid) + ": the process exited", err};
  if (err == EINVAL)  // the kernel logs "ref_ctr_offset mismatch" in dmesg then
    return {errno_message(what + " to process " + std::to_string(pid), err) +
                " (another tool, e.g. BCC's memleak, may hold a probe at the same address with a different "
                "reference counter: stop it and retry)",
            err};
  return {errno_message(what + " to process " + std::to_string(pid), err) + privilege_hint(err), err};
}

}  // namespace

// A session link for the C library's malloc, one for the other allocating
// entry points (cookie = entry code) and a uprobe_multi link for the frees.
Result<void> BpfSession::attach_session(pid_t pid, const std::string& path,
                                        const std::vector<ProbeTarget>& targets) {
  std::vector<uint64_t> offsets, cookies, malloc_offsets, malloc_cookies, free_offsets, free_cookies,
      go_offsets[3], go_cookies[3];
  for (const ProbeTarget& t : targets) {
    as_fn kind = as_fn_kind(t.fn);
    bool frees = kind == AS_FN_FREE, own = frees || t.fn == AS_FN_MALLOC;
    int go = kind == AS_FN_GO_MALLOC ? 0 : kind == AS_FN_GO_PROFILE ? 1 : kind == AS_FN_GO_FREE ? 2 : -1;
    auto& o = go >= 0 ? go_offsets[go] : frees ? free_offsets : own ? malloc_offsets : offsets;
    auto& c = go >= 0 ? go_cookies[go] : frees ? free_cookies : own ? malloc_cookies : cookies;
    o.push_back(t.offset);
    c.push_back(t.cookie());
  }
  auto go = go_programs_for(targets);
  if (!go) return fail(go.error());
  auto& p = skel_->progs;
  auto& g = (*go)->progs;
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
      {config_.null_probes ? p.null_multi : g.go_malloc_multi, kTraceUprobeMulti, go_offsets[0],
       go_cookies[0], "Go allocator probe"},
      {config_.null_probes ? p.null_multi : g.go_free_multi, kTraceUprobeMulti, go_offsets[2], go_cookies[2],
       "Go heap profile free probe"},  // before its samples' probe: no sample's free is missed
      {config_.null_probes ? p.null_multi : g.go_profile_multi, kTraceUprobeMulti, go_offsets[1],
       go_cookies[1], "Go heap profile probe"},
  };
  std::vector<UniqueFd> made;  // all or nothing: free without malloc's links, or the reverse, would mislead
  for (const Part& part : parts) {
    if (part.offsets.empty()) continue;
    int fd = create_uprobe_multi_link(bpf_program__fd(part.prog), part.type, path, part.offsets, part.cookies,
                                      pid);
    if (fd < 0) return fail(attach_error(std::string("attach ") + part.what + " (" + path + ")", pid, errno));
    made.emplace_back(fd);
  }
  for (UniqueFd& l : made) raw_links_.push_back(std::move(l));
  return {};
}

Result<void> BpfSession::attach_classic(pid_t pid, const std::string& path,
                                        const std::vector<ProbeTarget>& targets) {
  auto go = go_programs_for(targets);
  if (!go) return fail(go.error());
  // Return probes first: an entry seen without its return would leave the
  // thread's nesting depth raised and stop its sampling.
  for (bool retprobe : {true, false}) {
    if (retprobe && config_.null_probes) continue;
    for (const ProbeTarget& t : targets) {
      as_fn kind = as_fn_kind(t.fn);
      if (retprobe && (kind == AS_FN_FREE || kind == AS_FN_EXIT || is_go_entry(kind))) continue;
      bpf_program* prog = config_.null_probes ? skel_->progs.null_classic
                          : retprobe          ? skel_->progs.alloc_return
                                              : entry_program(is_go_entry(kind) ? *go : skel_.get(), kind);
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = t.cookie(), .retprobe = retprobe);
      bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid ? pid : -1, path.c_str(), t.offset, &opts);
      if (!link)
        return fail(attach_error(std::string("attach ") + (retprobe ? "uretprobe " : "uprobe ") +
                                     entry_name(t.fn) + " (" + path + ")",
                                 pid, errno));
      (retprobe ? return_links_ : entry_links_).emplace_back(link);
    }
  }
  return {};
}

Result<const char*> BpfSession::attach_in_process(pid_t pid, const std::string& path, bool releasable) {
  if (config_.null_probes)
    return fail("--null-probes measures allocator probes only, not in-process sampling");
  if (releasable) return attach_in_process_now(pid, path, &releasable_links_[path]);
  if (auto ok = remember(pid, path, {}, true); !ok) return fail(ok.error());
  if (paused_) return "none yet (paused)";
  auto provider = attach_in_process_now(pid, path);
  if (!provider && config_.pausable) attached_.pop_back();
  return provider;
}

// The preload library's twins of the otel_memory probes (preload/
// probe_sites.h) where the kernel rewrites them into calls; otel_memory's
// where it does not, or the file has no twins (another program's own
// probes, an older preload library).
Result<const char*> BpfSession::attach_in_process_now(pid_t pid, const std::string& path,
                                                      std::vector<Link>* into) {
  bool rewritten = kernel_->has(Feature::OptimizedUprobes);
  for (const char* provider : {AS_USDT_FAST_PROVIDER, AS_USDT_PROVIDER}) {
    bool twins = provider == std::string_view(AS_USDT_FAST_PROVIDER);
    if (twins && !rewritten) continue;
    std::vector<Link> made;
    int err = 0;
    for (auto [prog, name] :
         {std::pair{skel_->progs.usdt_alloc, "alloc"}, std::pair{skel_->progs.usdt_free, "free"}}) {
      if (!bpf_program__autoload(prog)) continue;
      bpf_link* link = bpf_program__attach_usdt(prog, pid ? pid : -1, path.c_str(), provider, name, nullptr);
      if (!link) {
        err = errno;
        break;
      }
      made.emplace_back(link);
    }
    // No twins in the file (or refused): otel_memory's probes.
    if (err && twins) continue;
    if (err)
      return fail(
          attach_error(std::string("attach USDT probes ") + provider + ":* (" + path + ")", pid, err));
    for (Link& l : made) (into ? *into : entry_links_).push_back(std::move(l));
    // The mark of an entry (allocscope's library alone fires it; a copy
    // of an older one has none, and its entries are marked by userspace).
    if (bpf_program__autoload(skel_->progs.usdt_entered))
      if (bpf_link* link = bpf_program__attach_usdt(skel_->progs.usdt_entered, pid ? pid : -1, path.c_str(),
                                                    AS_USDT_FAST_PROVIDER, "entered", nullptr))
        (into ? *into : entry_links_).emplace_back(link);
    return provider;
  }
  return fail("no in-process sampling probes in " + path);
}

void BpfSession::release_in_process(std::span<const std::string> paths) {
  std::vector<Link> released;
  for (const std::string& path : paths) {
    auto links = releasable_links_.find(path);
    if (links == releasable_links_.end()) continue;
    for (Link& l : links->second) released.push_back(std::move(l));
    releasable_links_.erase(links);
  }
  release_in_parallel(released);
}

void BpfSession::detach() {
  for (auto& [path, links] : releasable_links_)
    for (Link& l : links) entry_links_.push_back(std::move(l));
  releasable_links_.clear();
  // Entry probes before return probes: an entry seen without its return
  // would leave a thread's nesting depth raised.
  release_in_parallel(raw_links_, entry_links_);
  release_in_parallel(return_links_, lifecycle_links_);
  hold_guard_.reset();  // no process is held from here on: those still held go on
}

}  // namespace allocscope
