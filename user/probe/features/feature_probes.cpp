// Finds out what the running kernel can do (kernel_features.h) by trying:
// helpers and map types through libbpf's probes, links and sessions by
// attaching tiny programs (features.bpf.c) to functions of allocscope's own,
// and instruction emulation by whether a probed child needed an
// out-of-line single-step area.
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "base/result.h"
#include "base/unique_fd.h"
#include "features.skel.h"
#include "features_ctx.skel.h"
#include "host/privileges.h"
#include "host/proc_maps.h"
#include "probe/features/feature_cache.h"
#include "probe/features/kernel_features.h"
#include "probe/libbpf_log.h"
#include "probe/skeleton_variant.h"
#include "probe/uprobe_links.h"

// Functions whose first instruction is what a probe tests: a push, a
// 4-byte nop (emulated after 6.12), the preload library's 10-byte nop
// (rewritten into a call by 7.x) and a test (single-stepped by every
// kernel, as free's first instruction is). Nothing calls them but the
// probing child.
asm(R"(
    .pushsection .text
    .p2align 4
    .globl allocscope_probe_push
    .hidden allocscope_probe_push
    .type allocscope_probe_push, @function
allocscope_probe_push:
    push %rbp
    pop %rbp
    ret
    .size allocscope_probe_push, .-allocscope_probe_push
    .p2align 4
    .globl allocscope_probe_nop4
    .hidden allocscope_probe_nop4
    .type allocscope_probe_nop4, @function
allocscope_probe_nop4:
    nopl 0(%rax)
    ret
    .size allocscope_probe_nop4, .-allocscope_probe_nop4
    .p2align 4
    .globl allocscope_probe_nop10
    .hidden allocscope_probe_nop10
    .type allocscope_probe_nop10, @function
allocscope_probe_nop10:
    .byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
    ret
    .size allocscope_probe_nop10, .-allocscope_probe_nop10
    .p2align 4
    .globl allocscope_probe_test
    .hidden allocscope_probe_test
    .type allocscope_probe_test, @function
allocscope_probe_test:
    test %rdi, %rdi
    ret
    .size allocscope_probe_test, .-allocscope_probe_test
    .popsection
)");
extern "C" void allocscope_probe_push();
extern "C" void allocscope_probe_nop4();
extern "C" void allocscope_probe_nop10();
extern "C" void allocscope_probe_test();

namespace allocscope {
namespace {

FeatureState present() { return {Presence::Present, ""}; }
FeatureState missing(std::string why) { return {Presence::Missing, std::move(why)}; }
FeatureState unknown(std::string why, int err = 0) { return {Presence::Unknown, std::move(why), err}; }

// libbpf's probes: 1 yes, 0 no, < 0 could not tell (-EPERM without privileges).
FeatureState from_libbpf(int rc, const char* what) {
  if (rc == 1) return present();
  if (rc == 0) return missing(std::string(what) + " is unknown to this kernel");
  return unknown(errno_message(std::string("probe ") + what, -rc), -rc);
}

FeatureState helper(bpf_func_id id, const char* what) {
  return from_libbpf(libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, id, nullptr), what);
}

FeatureState map_type(bpf_map_type type, const char* what) {
  return from_libbpf(libbpf_probe_bpf_map_type(type, nullptr), what);
}

// Whether the kernel's bpf_session_is_return has a parameter (its context).
bool session_kfunc_takes_ctx() {
  std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), &btf__free);
  if (!vmlinux) return false;
  int id = btf__find_by_name_kind(vmlinux.get(), "bpf_session_is_return", BTF_KIND_FUNC);
  const btf_type* func = id > 0 ? btf__type_by_id(vmlinux.get(), id) : nullptr;
  const btf_type* proto = func ? btf__type_by_id(vmlinux.get(), func->type) : nullptr;
  return proto && btf_is_func_proto(proto) && btf_vlen(proto) > 0;
}

FeatureState btf_state() {
  std::unique_ptr<btf, decltype(&btf__free)> vmlinux(btf__load_vmlinux_btf(), &btf__free);
  if (vmlinux) return present();
  return missing(errno_message("read /sys/kernel/btf/vmlinux", errno));
}

// Where a function of ours lies in our executable, for the kernel: the
// file offset through /proc/self/exe.
Result<uint64_t> own_offset(void (*fn)()) {
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<Mapping> maps = parse_maps(text.str());
  const Mapping* m = find_mapping(maps, reinterpret_cast<uint64_t>(fn));
  struct stat exe;
  if (!m || stat("/proc/self/exe", &exe) != 0 || exe.st_ino != m->inode)
    return fail("the probe's target is not in allocscope's executable");
  return m->file_offset(reinterpret_cast<uint64_t>(fn));
}

struct FeaturesCloser {
  void operator()(features_bpf* s) const { features_bpf__destroy(s); }
};
using Features = std::unique_ptr<features_bpf, FeaturesCloser>;

enum class Probe { Null, Session };

bpf_program* program(features_bpf* s, Probe which) {
  return which == Probe::Session ? s->progs.probe_session : s->progs.probe_null;
}

// The features object with only program `which` loaded, as `attach_type`.
Result<Features> load_one(Probe which, uint32_t attach_type, bool kfunc_takes_ctx) {
  Features s(open_skeleton(features_bpf__create_skeleton, features_bpf__destroy,
                           kfunc_takes_ctx ? features_ctx_bpf__elf_bytes : nullptr));
  if (!s) return fail_errno("open the feature probes", errno);
  bpf_program* p;
  bpf_object__for_each_program(p, s->obj) bpf_program__set_autoload(p, false);
  bpf_program* prog = program(s.get(), which);
  bpf_program__set_autoload(prog, true);
  if (attach_type) bpf_program__set_expected_attach_type(prog, static_cast<bpf_attach_type>(attach_type));
  if (int err = features_bpf__load(s.get()); err != 0) return fail_errno("load", -err);
  return s;
}

// A link of the given type on a function of ours, in this process only.
FeatureState link_state(Probe which, uint32_t attach_type, const char* what, bool kfunc_takes_ctx) {
  auto offset = own_offset(allocscope_probe_push);
  if (!offset) return unknown(offset.error().message);
  auto s = load_one(which, attach_type, kfunc_takes_ctx);
  if (!s) {
    // EACCES here is the verifier's refusal: the kernel lacks the feature.
    if (s.error().code == EPERM) return unknown(errno_message(std::string("load ") + what, EPERM), EPERM);
    return missing(std::string(what) + ": " + s.error().message);
  }
  int fd = create_uprobe_multi_link(bpf_program__fd(program(s->get(), which)), attach_type, "/proc/self/exe",
                                    {*offset}, {0}, getpid());
  if (fd < 0) {
    int err = errno;
    if (err == EPERM || err == EACCES) return unknown(errno_message(std::string("attach ") + what, err), err);
    return missing(errno_message(std::string("attach ") + what, err));
  }
  close(fd);
  return present();
}

// Whether the calling process has a mapping of this name: "[uprobes]", the
// out-of-line single-step slots the kernel maps at the first probe it cannot
// emulate, or "[uprobes-trampoline]", where rewritten probes call. Allocates
// nothing: it runs in a child forked from a process that may have threads.
bool has_mapping_named(const char* name) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096 + 32];
  size_t kept = 0;
  bool found = false;
  for (;;) {
    ssize_t n = read(fd, buf + kept, sizeof buf - 1 - kept);
    if (n <= 0) break;
    size_t len = kept + size_t(n);
    buf[len] = 0;
    if (strstr(buf, name)) found = true;
    kept = len < 32 ? len : 32;  // a name across two reads
    memmove(buf, buf + len - kept, kept);
  }
  close(fd);
  return found;
}

// Runs `trial(fn)` in a child with a uprobe at fn's first instruction: the
// byte it answers, or why there is none (the attach's errno kept).
template <typename Answer>
Result<Answer> probed_child(bpf_program* prog, void (*fn)(), Answer (*trial)(void (*)())) {
  auto offset = own_offset(fn);
  if (!offset) return fail(offset.error());
  int go[2], answer[2];
  if (pipe2(go, O_CLOEXEC) != 0) return fail_errno("pipe", errno);
  UniqueFd go_read(go[0]), go_write(go[1]);
  if (pipe2(answer, O_CLOEXEC) != 0) return fail_errno("pipe", errno);
  UniqueFd answer_read(answer[0]), answer_write(answer[1]);
  pid_t child = fork();
  if (child < 0) return fail_errno("fork", errno);
  if (child == 0) {
    char c = 0;
    if (read(go_read.get(), &c, 1) == 1 && c == 1) {
      Answer said = trial(fn);
      [[maybe_unused]] ssize_t w = write(answer_write.get(), &said, sizeof said);
    }
    _exit(0);
  }
  LIBBPF_OPTS(bpf_uprobe_opts, opts);
  bpf_link* link = bpf_program__attach_uprobe_opts(prog, child, "/proc/self/exe", *offset, &opts);
  int attach_err = link ? 0 : errno;
  char c = link ? 1 : 0;
  Answer said{};
  [[maybe_unused]] ssize_t w = write(go_write.get(), &c, 1);
  answer_write.reset();
  ssize_t got = read(answer_read.get(), &said, sizeof said);
  waitpid(child, nullptr, 0);
  bpf_link__destroy(link);
  if (!link) return fail_errno("attach a uprobe", attach_err);
  if (got != ssize_t(sizeof said) || said < 0) return fail("the probed child did not answer");
  return said;
}

// Twice through the probe: 1 if the kernel single-stepped it.
char single_step_trial(void (*fn)()) {
  fn();
  fn();
  return has_mapping_named("[uprobes]") ? 1 : 0;
}

// Through the probe until the kernel may have rewritten it into a call: 0
// if it did not; else 2 if a forked child then runs through it and exits,
// 1 if the child dies (6.18's rewrite of 5-byte nops: the child has no
// trampoline to call).
char rewrite_trial(void (*fn)()) {
  for (int i = 0; i < 3; ++i) fn();
  if (!has_mapping_named("[uprobes-trampoline]")) return 0;
  pid_t grandchild = fork();
  if (grandchild == 0) {
    prctl(PR_SET_DUMPABLE, 0);  // no core file if it dies
    fn();
    fn();
    _exit(0);
  }
  int status = 0;
  if (grandchild < 0 || waitpid(grandchild, &status, 0) != grandchild) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 2 : 1;
}

constexpr int kENOTSUPP = 524;  // the kernel's own: a probe on an instruction it cannot handle

FeatureState rewrite_state(bpf_program* prog) {
  auto said = probed_child(prog, allocscope_probe_nop10, rewrite_trial);
  if (!said) {
    int err = said.error().code;
    if (err == EPERM || err == EACCES || err == 0) return unknown(said.error().message, err);
    if (err == kENOTSUPP) return missing("the kernel refuses a probe on a 10-byte nop (ENOTSUPP)");
    return missing("a probe on a 10-byte nop is refused (" + said.error().message + ")");
  }
  if (*said == 0) return missing("a probe on a 10-byte nop is not rewritten into a call");
  if (*said == 1) return missing("a forked child dies at a probe rewritten into a call");
  return present();
}

// Whether the kernel runs a probed push and a probed multi-byte nop without
// a single-step, and rewrites a probed 10-byte nop into a call that forked
// children keep.
// Nanoseconds a call of fn takes, the mean of kTimedCalls.
constexpr int kTimedCalls = 500;
double call_ns(void (*fn)()) {
  fn();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kTimedCalls; ++i) fn();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
         kTimedCalls;
}

// What a trap into a probe costs here: a call through one (whose program
// does nothing) less the call alone. 0 when it cannot be timed.
double trap_ns(bpf_program* prog, void (*fn)()) {
  auto probed = probed_child(prog, fn, call_ns);
  return probed ? std::max(0.0, *probed - call_ns(fn)) : 0;
}

void probe_emulation(KernelFeatures& k) {
  auto s = load_one(Probe::Null, 0, k.session_kfunc_takes_ctx);
  if (!s) {
    FeatureState why = unknown(s.error().message, s.error().code);
    for (Feature f : {Feature::PushEmulation, Feature::NopEmulation, Feature::OptimizedUprobes})
      k.states[size_t(f)] = why;
    return;
  }
  bpf_program* prog = (*s)->progs.probe_null;
  auto judge = [&](void (*fn)(), const char* what) {
    auto stepped = probed_child(prog, fn, single_step_trial);
    if (!stepped) return unknown(stepped.error().message, stepped.error().code);
    return *stepped == 1 ? missing(what) : present();
  };
  k.states[size_t(Feature::PushEmulation)] =
      judge(allocscope_probe_push, "a probe on push %rbp single-stepped");
  k.states[size_t(Feature::NopEmulation)] =
      judge(allocscope_probe_nop4, "a probe on a 4-byte nop single-stepped");
  k.states[size_t(Feature::OptimizedUprobes)] = rewrite_state(prog);
  k.trap_ns = trap_ns(prog, allocscope_probe_push);
  k.stepped_trap_ns = trap_ns(prog, allocscope_probe_test);
}

}  // namespace

KernelFeatures probe_kernel_features() {
  KernelFeatures k;
  utsname u{};
  if (uname(&u) == 0) k.release = u.release;
  // Without the right to load programs nothing can be told (and libbpf's
  // helper probes would answer yes to a refused load).
  Privileges p = current_privileges();
  if (p.euid != 0u && !p.has(kCapBpf) && !p.has(kCapSysAdmin)) {
    for (FeatureState& s : k.states) s = unknown("loading BPF needs root or CAP_BPF", EPERM);
    return k;
  }
  bool verbose = set_libbpf_verbose(false);  // the probes' refusals are expected
  auto set = [&](Feature f, FeatureState s) { k.states[size_t(f)] = std::move(s); };
  set(Feature::Btf, btf_state());
  set(Feature::RingBuffer, map_type(BPF_MAP_TYPE_RINGBUF, "the ring buffer map"));
  FeatureState storage = map_type(BPF_MAP_TYPE_TASK_STORAGE, "the task storage map");
  if (storage.presence == Presence::Present)
    storage = helper(BPF_FUNC_task_storage_get, "bpf_task_storage_get in tracing programs");
  if (storage.presence == Presence::Present)
    storage = helper(BPF_FUNC_get_current_task_btf, "bpf_get_current_task_btf");
  set(Feature::TaskStorage, storage);
  set(Feature::Cookies, helper(BPF_FUNC_get_attach_cookie, "bpf_get_attach_cookie"));
  set(Feature::Loop, helper(BPF_FUNC_loop, "bpf_loop"));
  set(Feature::FindVma, helper(BPF_FUNC_find_vma, "bpf_find_vma"));
  set(Feature::AncestorCgroup, helper(BPF_FUNC_get_current_ancestor_cgroup_id,
                                      "bpf_get_current_ancestor_cgroup_id in tracing programs"));
  k.session_kfunc_takes_ctx = session_kfunc_takes_ctx();
  set(Feature::UprobeMulti,
      link_state(Probe::Null, kTraceUprobeMulti, "uprobe_multi link", k.session_kfunc_takes_ctx));
  set(Feature::UprobeSession,
      link_state(Probe::Session, kTraceUprobeSession, "uprobe session", k.session_kfunc_takes_ctx));
  probe_emulation(k);
  set_libbpf_verbose(verbose);
  return k;
}

namespace {

std::string& forced_fallbacks() {
  static std::string list;
  return list;
}

void apply_forced_fallbacks(KernelFeatures& k) {
  [[maybe_unused]] auto unknown = force_fallbacks(k, forced_fallbacks());
}

// Probed afresh, and kept for this boot where that can be done safely.
KernelFeatures probe_and_keep() {
  KernelFeatures k = probe_kernel_features();
  if (auto key = feature_cache_key()) [[maybe_unused]]
    auto kept = store_cached_features(kFeatureCacheDir, *key, k);  // else probed next time
  return k;
}

}  // namespace

Result<void> set_forced_fallbacks(const std::string& list) {
  KernelFeatures names;
  std::vector<std::string> unknown = force_fallbacks(names, list);
  if (!unknown.empty()) {
    std::string optional;
    for (const FeatureSpec& s : feature_specs())
      if (!s.required) optional += std::string(optional.empty() ? "" : ", ") + s.key;
    return fail("--force-fallback: '" + unknown.front() +
                "' is not an optional kernel feature (those are: " + optional + ")");
  }
  forced_fallbacks() = list;
  return {};
}

const KernelFeatures& kernel_features() {
  static const KernelFeatures features = [] {
    std::optional<KernelFeatures> kept;
    if (auto key = feature_cache_key()) kept = load_cached_features(kFeatureCacheDir, *key);
    KernelFeatures k = kept ? std::move(*kept) : probe_and_keep();
    apply_forced_fallbacks(k);
    return k;
  }();
  return features;
}

KernelFeatures fresh_kernel_features() {
  KernelFeatures k = probe_and_keep();
  apply_forced_fallbacks(k);
  return k;
}

}  // namespace allocscope
