#include "process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace allocscope {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return fail(errno_message("open " + path, errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool process_exists(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

std::string read_comm(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/comm");
  if (!text)
    return "";
  std::string comm = *text;
  while (!comm.empty() && comm.back() == '\n')
    comm.pop_back();
  return comm;
}

Result<std::vector<Mapping>> read_maps(pid_t pid) {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/maps");
  if (!text)
    return fail(text.error());
  return parse_maps(*text);
}

std::string mapped_file_path(pid_t pid, const Mapping& m) {
  char name[64];
  std::snprintf(name, sizeof name, "/map_files/%llx-%llx", (unsigned long long)m.start,
                (unsigned long long)m.end);
  std::string via_map_files = "/proc/" + std::to_string(pid) + name;
  if (access(via_map_files.c_str(), R_OK) == 0)
    return via_map_files;
  return "/proc/" + std::to_string(pid) + "/root" + m.path;
}

}  // namespace allocscope
