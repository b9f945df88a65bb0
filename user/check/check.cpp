#include "check/check.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "check/check_report.h"
#include "host/preload_library.h"
#include "probe/features/probe_choice.h"
#include "probe/session/bpf_session.h"

namespace allocscope {
namespace {

// The sessions record and agent open, by what the kernel verifies apart:
// the rate (exact mode keeps totals in the kernel), the unwinder, the probe
// mode and whether probes are system-wide (the agent, --all, -- CMD).
struct TrialConfig {
  const char* what;
  SessionConfig config;
};

SessionConfig base_config() {
  SessionConfig c;
  c.rate = 512 * 1024;
  c.max_live = 1 << 18;
  c.ringbuf_bytes = 16 << 20;
  c.filter_processes = true;
  c.follow_children = true;
  c.cgroup_names = true;
  return c;
}

std::vector<TrialConfig> trial_configs(ProbeMode chosen) {
  std::vector<TrialConfig> trials;
  trials.push_back({"record, sampled (default)", base_config()});
  SessionConfig exact = base_config();
  exact.rate = 1;
  exact.max_live = 1 << 22;
  trials.push_back({"record --rate 1 (exact)", exact});
  SessionConfig fp = base_config();
  fp.unwind_tables = false;
  trials.push_back({"record --unwind fp", fp});
  if (chosen != ProbeMode::Classic) {
    SessionConfig classic = base_config();
    classic.mode = ProbeMode::Classic;
    trials.push_back({"record --probe-mode classic", classic});
  }
  SessionConfig all = base_config();
  all.trace_unknown = true;
  all.follow_children = false;
  all.live_share = all.max_live / 4;
  trials.push_back({"agent and record --all", all});
  return trials;
}

LoadTrial try_load(const TrialConfig& t, bool verbose) {
  SessionConfig c = t.config;
  c.verbose = verbose;  // libbpf's messages: the verifier's log of a refusal
  c.verifier_stats = true;
  auto start = std::chrono::steady_clock::now();
  auto session = BpfSession::open(c, [](std::span<const uint8_t>) { return true; });
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!session) return {t.what, false, session.error().message, ms, {}};
  return {t.what, true, "", ms, (*session)->verifier_stats()};
}

}  // namespace

int check(const CheckConfig& config) {
  if (auto forced = set_forced_fallbacks(config.force_fallback); !forced) {
    std::fprintf(stderr, "allocscope: %s\n", forced.error().message.c_str());
    return 2;
  }
  CheckReport r;
  r.kernel = fresh_kernel_features();  // the truth now, not what an earlier run kept
  r.privileges = current_privileges();
  r.lockdown = current_lockdown();
  r.memlock = memlock_limit();
  r.perf_event_paranoid = perf_event_paranoid();
  if (auto library = find_preload_library())
    r.preload_library = *library;
  else
    r.preload_refusal = library.error().message;
  r.mode = choose_probe_mode(r.kernel, ProbeMode::Auto).value_or(ProbeMode::Classic);
  // Where required features are missing the programs are not loaded: the
  // refusal is the answer, in one line.
  if (missing_features_message(r.kernel).empty())
    for (const TrialConfig& t : trial_configs(r.mode)) r.trials.push_back(try_load(t, config.verbose));
  std::fputs((config.json ? render_check_json(r) : render_check(r, config.verbose)).c_str(), stdout);
  std::fflush(stdout);
  return can_record(r) ? 0 : 1;
}

}  // namespace allocscope
