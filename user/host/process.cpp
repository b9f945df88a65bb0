#include "host/process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace allocscope {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail_errno("open " + path, errno);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool process_exists(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::string read_comm(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/comm");
  if (!text) return "";
  std::string comm = *text;
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  return comm;
}

size_t pid_namespace_depth(std::string_view status) {
  size_t at = status.find("\nNSpid:");
  if (at == std::string_view::npos) return 0;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  size_t ids = 0;
  for (size_t i = 0; i < line.size(); ++i)
    ids += line[i] >= '0' && line[i] <= '9' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t');
  return ids;
}

pid_t namespaced_pid(std::string_view status) {
  size_t at = status.find("\nNSpid:");
  if (at == std::string_view::npos) return 0;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  size_t last = line.find_last_of(" \t");
  line = last == std::string_view::npos ? line : line.substr(last + 1);
  pid_t pid = 0;
  std::from_chars(line.data(), line.data() + line.size(), pid);
  return pid;
}

bool in_nested_pid_namespace(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/status");
  return text && pid_namespace_depth(*text) > 1;
}

bool in_other_time_namespace(pid_t pid) {
  struct stat mine {
  }, theirs{};
  if (stat("/proc/self/ns/time", &mine) != 0) return false;
  if (stat(("/proc/" + std::to_string(pid) + "/ns/time").c_str(), &theirs) != 0) return false;
  return mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev;
}

std::string cgroup_v2_path(std::string_view text) {
  while (!text.empty()) {
    std::string_view line = text.substr(0, text.find('\n'));
    if (line.starts_with("0::")) return std::string(line.substr(3));
    if (line.size() == text.size()) break;
    text.remove_prefix(line.size() + 1);
  }
  return "";
}

std::string read_cgroup_path(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/cgroup");
  return text ? cgroup_v2_path(*text) : "";
}

Result<std::vector<Mapping>> read_maps(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text) return fail(text.error());
  return parse_maps(*text);
}

std::string mapped_file_path(pid_t pid, const Mapping& m) {
  char name[64];
  std::snprintf(name, sizeof name, "/map_files/%llx-%llx", (unsigned long long)m.start,
                (unsigned long long)m.end);
  std::string via_map_files = "/proc/" + std::to_string(pid) + name;
  if (access(via_map_files.c_str(), R_OK) == 0) return via_map_files;
  return "/proc/" + std::to_string(pid) + "/root" + m.path;
}

std::string find_program(const std::string& command) {
  if (command.find('/') != std::string::npos) return access(command.c_str(), X_OK) == 0 ? command : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = end > at ? dirs.substr(at, end - at) : ".";
    std::string candidate = dir + "/" + command;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

std::vector<pid_t> list_processes() {
  std::vector<pid_t> pids;
  struct DirCloser {
    void operator()(DIR* d) const { closedir(d); }
  };
  std::unique_ptr<DIR, DirCloser> dir(opendir("/proc"));
  if (!dir) return pids;
  while (dirent* d = readdir(dir.get())) {
    char* end;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end == '\0' && pid > 0) pids.push_back(pid_t(pid));
  }
  return pids;
}

pid_t parent_from_stat(std::string_view stat) {
  size_t close = stat.rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string_view::npos || close + 4 >= stat.size()) return 0;
  std::string_view rest = stat.substr(close + 4);  // past ") S "
  return pid_t(std::strtol(std::string(rest.substr(0, rest.find(' '))).c_str(), nullptr, 10));
}

// Field `n` (1-based, as proc(5) numbers them; n >= 3) of a /proc/PID/stat line.
static std::string stat_field(std::string_view stat, int n) {
  size_t close = stat.rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string_view::npos || close + 2 > stat.size()) return "";
  std::istringstream fields{std::string(stat.substr(close + 2))};  // field 3 (state) onwards
  std::string f;
  for (int i = 3; i <= n; ++i)
    if (!(fields >> f)) return "";
  return f;
}

uint64_t start_code_from_stat(std::string_view stat) {
  return std::strtoull(stat_field(stat, 26).c_str(), nullptr, 10);
}

uint64_t process_start_code(pid_t pid) {
  auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  return stat ? start_code_from_stat(*stat) : 0;
}

bool kernel_thread_from_stat(std::string_view stat) {
  constexpr uint64_t kPfKthread = 0x00200000;  // include/linux/sched.h
  return std::strtoull(stat_field(stat, 9).c_str(), nullptr, 10) & kPfKthread;
}

bool is_kernel_thread(pid_t pid) {
  auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  return stat && kernel_thread_from_stat(*stat);
}

uint64_t process_start_ticks(pid_t pid) {
  auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  return stat ? std::strtoull(stat_field(*stat, 22).c_str(), nullptr, 10) : 0;
}

double process_start_time(pid_t pid) {
  auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  auto machine = read_text_file("/proc/stat");
  if (!stat || !machine) return 0;
  size_t btime = machine->find("\nbtime ");
  std::string start = stat_field(*stat, 22);  // clock ticks after boot
  if (btime == std::string::npos || start.empty()) return 0;
  double ticks = std::strtod(start.c_str(), nullptr);
  return std::strtod(machine->c_str() + btime + 7, nullptr) + ticks / double(sysconf(_SC_CLK_TCK));
}

std::vector<pid_t> descendants_of(const std::vector<pid_t>& roots) {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  for (pid_t pid : list_processes())
    if (auto stat = read_text_file("/proc/" + std::to_string(pid) + "/stat"))
      children[parent_from_stat(*stat)].push_back(pid);
  std::vector<pid_t> out, todo = roots;
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

std::string cgroup2_mount(std::string_view mountinfo) {
  while (!mountinfo.empty()) {
    size_t nl = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, nl);
    mountinfo.remove_prefix(nl == std::string_view::npos ? mountinfo.size() : nl + 1);
    size_t dash = line.find(" - ");
    if (dash == std::string_view::npos || !line.substr(dash + 3).starts_with("cgroup2 ")) continue;
    std::string_view f = line;  // id parent major:minor root MOUNTPOINT ...
    for (int i = 0; i < 4 && !f.empty(); ++i) f.remove_prefix(std::min(f.size(), f.find(' ') + 1));
    return std::string(f.substr(0, f.find(' ')));
  }
  return "";
}

std::vector<std::string_view> path_components(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

std::string cgroup_path_of_id(uint64_t id) {
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  std::string root = mountinfo ? cgroup2_mount(*mountinfo) : "";
  if (root.empty() || id == 0) return "";
  // Breadth first, without following symlinks (cgroupfs has none): the
  // units of system.slice are found before deep container trees.
  std::vector<std::string> queue{""};
  for (size_t next = 0, seen = 0; next < queue.size() && seen < 100000; ++next) {
    std::string rel = queue[next];
    struct stat st;
    if (lstat((root + rel).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (uint64_t(st.st_ino) == id) return rel.empty() ? "/" : rel;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir((root + rel).c_str()), closedir);
    if (!dir) continue;
    while (dirent* e = readdir(dir.get()))
      if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0 &&
          ++seen < 100000)
        queue.push_back(rel + "/" + e->d_name);
  }
  return "";
}

Result<CgroupId> find_cgroup(const std::string& path) {
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  std::string root = mountinfo ? cgroup2_mount(*mountinfo) : "";
  if (root.empty()) return fail("--cgroup needs cgroup v2 (the unified hierarchy) mounted");
  std::string rel = path.starts_with(root + "/") || path == root ? path.substr(root.size()) : path;
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  if (!rel.empty() && rel.front() != '/') rel = "/" + rel;
  struct stat st;
  if (stat((root + rel).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail("no such cgroup: " + path + " (looked for " + root + rel + ")");
  CgroupId c;
  c.id = st.st_ino;  // a cgroup v2 directory's inode number is the cgroup's id
  for (char ch : rel) c.level += ch == '/';
  if (c.level == 0) return fail("--cgroup " + path + " is the root cgroup: every process; use --all alone");
  return c;
}

std::vector<char*> exec_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace allocscope
