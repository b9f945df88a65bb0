// SIGINT, SIGTERM and SIGHUP end a recording: the loop sees the signal, the
// outputs are written, and a launched command is passed the signal.
#pragma once

namespace allocscope {

// Without SA_RESTART: a signal interrupts the poll. SIGHUP stops too unless
// the caller handles it (hangup_stops false).
void install_stop_handlers(bool hangup_stops = true);
// The signal that asked to stop, 0 while none has.
int stop_signal();

}  // namespace allocscope
