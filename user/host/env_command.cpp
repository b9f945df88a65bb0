#include "host/env_command.h"

namespace allocscope {
namespace {

std::vector<std::string> split_preload(const std::string& value) {
  // ld.so separates LD_PRELOAD's entries by spaces or colons.
  std::vector<std::string> out;
  std::string entry;
  for (char c : value + ":") {
    if (c == ':' || c == ' ') {
      if (!entry.empty()) out.push_back(entry);
      entry.clear();
    } else {
      entry += c;
    }
  }
  return out;
}

}  // namespace

EnvCommand through_env(const std::vector<std::string>& command) {
  EnvCommand e;
  if (command.empty()) return e;
  e.program = command[0];
  std::string base = command[0].substr(command[0].rfind('/') + 1);
  if (base != "env") return e;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    if (a == "-i" || a == "--ignore-environment" || a == "-") continue;
    if (a == "-u" || a == "--unset" || a == "-C" || a == "--chdir") {
      ++i;
      continue;
    }
    if (a == "--") {
      if (i + 1 < command.size()) e.program = command[i + 1];
      return e;
    }
    if (!a.empty() && a[0] == '-') return {command[0], {}};  // -S and the like: not understood
    size_t eq = a.find('=');
    if (eq == std::string::npos) {
      e.program = a;
      return e;
    }
    if (a.compare(0, eq, "LD_PRELOAD") == 0) {
      e.preloads = split_preload(a.substr(eq + 1));
      e.preload_arg = i;
    }
  }
  return {command[0], {}};  // env with no program prints the environment
}

std::vector<std::string> with_first_preload(const std::vector<std::string>& command,
                                            const std::string& library) {
  EnvCommand e = through_env(command);
  if (!e.preload_arg) return command;
  std::vector<std::string> out = command;
  std::string rest = command[e.preload_arg].substr(sizeof "LD_PRELOAD=" - 1);
  out[e.preload_arg] = "LD_PRELOAD=" + library + (rest.empty() ? "" : ":" + rest);
  return out;
}

}  // namespace allocscope
