// The agent: an HTTP server beside an endless recording of the chosen
// processes, the two meeting only in the Bridge.
#include "agent/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "agent/bridge.h"
#include "agent/fold_groups.h"
#include "agent/http_api.h"
#include "agent/label_cache.h"
#include "agent/listen_address.h"
#include "base/clocks.h"
#include "host/files.h"
#include "probe/features/kernel_features.h"
#include "record/session/stop_signals.h"

namespace allocscope {
namespace {

volatile sig_atomic_t g_hangup = 0;
void on_hangup(int) { g_hangup = 1; }

// systemd gives a service JOURNAL_STREAM: lines then carry the journal's
// "<priority>" prefix (sd-daemon(3)); a terminal gets plain lines.
void log(int priority, const char* format, ...) {
  static const bool journal = std::getenv("JOURNAL_STREAM") != nullptr;
  std::string line = journal ? "<" + std::to_string(priority) + ">allocscope: " : "allocscope: ";
  char buf[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  std::fprintf(stderr, "%s%s\n", line.c_str(), buf);
}

// --log: appended to, never through a symlink, 0600; stderr becomes it.
Result<void> open_log(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) return fail_errno("open log " + path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail("log " + path + ": not a regular file", EINVAL);
  }
  dup2(fd, STDERR_FILENO);
  close(fd);
  return {};
}

Result<std::string> read_token(const std::string& path) {
  auto file = read_file_owned_by(path, getuid(), 4096);
  if (!file) return fail(file.error());
  std::string token = file->text;
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  if (token.empty()) return fail("token file " + path + " is empty", EINVAL);
  for (char c : token)
    if (!std::isgraph(static_cast<unsigned char>(c)))
      return fail("token file " + path + ": one line of printable characters", EINVAL);
  return token;
}

// Ended processes' stacks are folded into their program's and cgroup's
// once they have been ended for the retention (looked for every 10 s:
// finding them reads every stack), so that memory follows what is
// distinct, not the uptime; all of them at once when the stack table is
// half full, and then without waiting 10 s past three quarters (fast churn
// fills a small table within 10 s).
void fold_ended(LiveView& view, LabelCache& labels, FoldGroups& groups, const AgentConfig& config,
                uint64_t& last_ms) {
  uint64_t now = now_ms();
  auto [used, capacity] = view.stack_table();
  if (now - last_ms < 10000 && used < capacity / 4 * 3) return;
  last_ms = now;
  uint64_t retention = config.retention_ms;
  uint64_t before = used >= capacity / 2 ? now + 1 : now > retention ? now - retention : 0;
  auto group = [&](uint32_t instance, const ProcessInstance& p) {
    return groups.key(p.comm, labels.of(instance).cgroup);
  };
  for (const Folded& f : view.fold_ended(before, group, uint64_t(config.max_seconds) * 1000)) {
    if (f.made)
      labels.set(f.into, view.process_table().instance(f.into).serial, labels_from_cgroup(f.key.group));
    labels.forget(f.totals.instance);
  }
}

}  // namespace

int agent(const AgentConfig& config) {
  auto where = parse_listen(config.listen);
  if (!where) {
    log(3, "%s", where.error().message.c_str());
    return 2;
  }
  std::string token;
  if (!config.token_file.empty()) {
    auto t = read_token(config.token_file);
    if (!t) {
      log(3, "%s", t.error().message.c_str());
      return 1;
    }
    token = *t;
  }
  if (!config.log_file.empty())
    if (auto ok = open_log(config.log_file); !ok) {
      log(3, "%s", ok.error().message.c_str());
      return 1;
    }
  if (auto forced = set_forced_fallbacks(config.record.force_fallback); !forced) {
    log(3, "%s", forced.error().message.c_str());
    return 2;
  }
  // A kernel allocscope cannot record on is told in one line, before the
  // server announces itself.
  if (std::string why = missing_features_message(kernel_features()); !why.empty()) {
    log(3, "%s", why.c_str());
    return 1;
  }
  if (!where->loopback() && token.empty())
    log(4,
        "warning: listening on %s without --token-file: anyone who can reach it reads the code and heap of "
        "every process recorded",
        config.listen.c_str());

  // A removed cgroup's processes are labelled well within the retention
  // (each at the tick after its first sample; a sample may wait behind a
  // table build for ten seconds): its path goes then.
  const uint64_t retention_ms = config.retention_ms;
  Bridge bridge(16);
  LabelCache labels(1 << 16);
  FoldGroups groups(1024);
  uint64_t last_fold_ms = 0;
  bool started = false;
  bridge.set_tick([&](LiveView& view) {
    if (!started) {  // the first tick: every probe is in place
      started = true;
      std::string note = hold_note(config.record);
      log(6, "recording: probes attached%s%s", note.empty() ? "" : "; ", note.c_str());
    }
    labels.refresh(view.process_table(),
                   [&view](uint64_t id) -> const std::string& { return view.cgroup_path(id); });
    uint64_t now = now_ms();
    if (now > retention_ms) view.forget_removed_cgroups(now - retention_ms);
    fold_ended(view, labels, groups, config, last_fold_ms);
    if (g_hangup) {
      g_hangup = 0;
      if (!config.log_file.empty())
        if (auto ok = open_log(config.log_file); !ok) log(3, "%s", ok.error().message.c_str());
      log(6, "SIGHUP: log reopened");
    }
  });
  // From here on SIGTERM and SIGINT stop the recording (even before it
  // starts), and SIGHUP reopens the log.
  install_stop_handlers(false);
  struct sigaction sa {};
  sa.sa_handler = on_hangup;
  sigaction(SIGHUP, &sa, nullptr);

  HttpApi api(config, bridge, labels, groups, token);
  if (auto ok = api.start(where->host, where->port); !ok) {
    log(3, "%s", ok.error().message.c_str());
    return 1;
  }
  log(6,
      "serving http://%s%s%s:%d/ (profiles at /debug/pprof/heap and /debug/pprof/allocs, /metrics, /targets)",
      where->host.find(':') != std::string::npos ? "[" : "", where->host.c_str(),
      where->host.find(':') != std::string::npos ? "]" : "", where->port);
  // However record() ends (an error before its loop, an exception), the
  // requests waiting in the bridge are released before the server joins them.
  struct StopBridge {
    Bridge& bridge;
    ~StopBridge() { bridge.on_stop(); }
  };
  int status;
  {
    StopBridge stop{bridge};
    status = record(config.record, &bridge);
  }
  api.stop();
  log(6, "stopped: probes detached; %llu requests served", static_cast<unsigned long long>(api.requests()));
  return status;
}

}  // namespace allocscope
