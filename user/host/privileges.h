// What the calling process may do, as far as loading BPF and probing other
// processes go: its user, its effective capabilities, the kernel's lockdown
// and the limits that used to bound BPF memory. Parsed from text, read apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace allocscope {

// Capability numbers (linux/capability.h).
constexpr int kCapSysPtrace = 19;
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

struct Privileges {
  std::optional<uint32_t> euid;          // effective user id
  std::optional<uint64_t> capabilities;  // effective set (CapEff), bit n = capability n
  bool has(int cap) const { return capabilities && (*capabilities >> cap & 1); }
};

// From /proc/self/status: its "Uid:" and "CapEff:" lines.
Privileges parse_privileges(std::string_view status);
Privileges current_privileges();

// The kernel lockdown mode from /sys/kernel/security/lockdown ("none
// [integrity] confidentiality" -> "integrity"); nullopt when not readable.
std::optional<std::string> parse_lockdown(std::string_view text);
std::optional<std::string> current_lockdown();

// Whether /proc/self/uid_map's text is the initial user namespace's (every
// id mapped to itself): root there is root; in another, a mapped user.
bool is_initial_uid_map(std::string_view uid_map);
bool in_initial_user_namespace();

// RLIMIT_MEMLOCK's soft limit in bytes; nullopt for unlimited.
std::optional<uint64_t> memlock_limit();

// /proc/sys/kernel/perf_event_paranoid; nullopt when unreadable.
std::optional<int> perf_event_paranoid();

}  // namespace allocscope
