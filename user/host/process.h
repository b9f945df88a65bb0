// Reading a process's state from /proc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "host/proc_maps.h"

namespace allocscope {

Result<std::string> read_text_file(const std::string& path);
bool process_exists(pid_t pid);
std::string read_comm(pid_t pid);  // "" when gone
Result<std::vector<Mapping>> read_maps(pid_t pid);

// A path that opens the file behind a mapping of a live process, also when
// it lives in another mount namespace or was deleted since.
std::string mapped_file_path(pid_t pid, const Mapping& m);

// A null-terminated array for exec, pointing into `strings` (made before a
// fork: the child must not allocate).
std::vector<char*> exec_strings(const std::vector<std::string>& strings);

// The file execvp would run for `command` (PATH searched); "" if none.
std::string find_program(const std::string& command);

// Every process id in /proc.
std::vector<pid_t> list_processes();

// The processes now running below `roots` in the process tree (children,
// their children, ...), from each process's parent in /proc/PID/stat.
std::vector<pid_t> descendants_of(const std::vector<pid_t>& roots);

// The parent process id field of a /proc/PID/stat line; 0 if malformed.
pid_t parent_from_stat(std::string_view stat);

// Where the kernel put the start of the program's code (the startcode
// field: its first executable segment plus the load bias); 0 when unknown.
uint64_t start_code_from_stat(std::string_view stat);
uint64_t process_start_code(pid_t pid);

// Whether a /proc/PID/stat line is a kernel thread's (PF_KTHREAD in its
// flags field), and the same of a process.
bool kernel_thread_from_stat(std::string_view stat);
bool is_kernel_thread(pid_t pid);

// How many ids a /proc/PID/status text gives its process (its NSpid line:
// one per PID namespace from /proc's down to its own); 0 if none.
size_t pid_namespace_depth(std::string_view status);
// The process's id in its own PID namespace (the last of its NSpid line);
// 0 if none.
pid_t namespaced_pid(std::string_view status);
// Whether the process lives in a PID namespace below /proc's (its getpid()
// is not its id here).
bool in_nested_pid_namespace(pid_t pid);
// Whether the process's CLOCK_MONOTONIC is not this one's (a time namespace
// of its own, with its offsets). False when the kernel has none, or when
// either cannot be read.
bool in_other_time_namespace(pid_t pid);

// When the process started, seconds since the epoch; 0 when unknown.
double process_start_time(pid_t pid);
// ... in clock ticks after boot, as its stat says (with its id, which
// process it is); 0 when unknown.
uint64_t process_start_ticks(pid_t pid);

// A cgroup v2 directory (a path under the cgroup2 mount, e.g.
// /sys/fs/cgroup/system.slice/x.service, or as /proc/PID/cgroup names it:
// "/system.slice/x.service"): its id and depth below the root.
struct CgroupId {
  uint64_t id = 0;
  uint32_t level = 0;
};
Result<CgroupId> find_cgroup(const std::string& path);
// A path's non-empty components, in order ("/a//b" -> a, b).
std::vector<std::string_view> path_components(std::string_view path);
// The cgroup v2 path in /proc/PID/cgroup's text (the "0::" line), "" if none.
std::string cgroup_v2_path(std::string_view proc_cgroup);
// The process's cgroup v2 path ("/system.slice/x.service"); "" when gone.
std::string read_cgroup_path(pid_t pid);
// Where /proc/self/mountinfo (its text) has cgroup v2 mounted; "" if nowhere.
std::string cgroup2_mount(std::string_view mountinfo);
// The path ("/system.slice/x.service") of the cgroup v2 whose id is `id`
// (the inode number of its directory, what BPF's cgroup id is), found by a
// walk of the hierarchy (at most 100000 directories); "" when it is gone.
std::string cgroup_path_of_id(uint64_t id);

}  // namespace allocscope
