// pyenv's CPython interpreters on this machine (each a shared-libpython
// build, as python.org's images and conda ship): the Python tests' way to
// every version there is. Header-only: unit and integration tests use it.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace allocscope::test {

struct PyenvInterpreter {
  int minor = 0;     // of 3.minor
  std::string path;  // .../versions/3.X.Y/bin/python3.X
};

// The interpreters of versions 3.from to 3.to, the newest patch release of
// each, from $PYENV_ROOT, ~/.pyenv or /root/.pyenv (the first that has any).
inline std::vector<PyenvInterpreter> pyenv_interpreters(int from = 8, int to = 13) {
  std::vector<std::string> roots;
  if (const char* r = std::getenv("PYENV_ROOT")) roots.push_back(r);
  if (const char* h = std::getenv("HOME")) roots.push_back(std::string(h) + "/.pyenv");
  roots.push_back("/root/.pyenv");
  static const std::regex version(R"(^3\.(\d+)\.(\d+)$)");
  for (const std::string& root : roots) {
    std::map<int, std::pair<int, std::string>> found;  // minor: newest patch, path
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator(root + "/versions", ec)) {
      std::smatch m;
      std::string name = d.path().filename().string();
      if (!std::regex_match(name, m, version)) continue;
      int minor = std::stoi(m[1]), patch = std::stoi(m[2]);
      std::string path = d.path().string() + "/bin/python3." + m[1].str();
      if (minor < from || minor > to || access(path.c_str(), X_OK) != 0) continue;
      auto it = found.find(minor);
      if (it == found.end() || it->second.first < patch) found[minor] = {patch, path};
    }
    if (found.empty()) continue;
    std::vector<PyenvInterpreter> out;
    for (const auto& [minor, p] : found) out.push_back({minor, p.second});
    return out;
  }
  return {};
}

}  // namespace allocscope::test
