#include "record/session/stop_signals.h"

#include <signal.h>

namespace allocscope {
namespace {

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

void install_stop_handlers(bool hangup_stops) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: interrupt the poll
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (hangup_stops) sigaction(SIGHUP, &sa, nullptr);
}

int stop_signal() { return g_stop_signal; }

}  // namespace allocscope
