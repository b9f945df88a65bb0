// A private directory under /tmp for one test, removed with its contents.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace allocscope {

// `mode`: mkdtemp's 0700, or wider for a workload that drops privileges.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name = "allocscope-test", mode_t mode = 0700) {
    std::string tmpl = "/tmp/" + name + "-XXXXXX";
    if (!mkdtemp(tmpl.data()) || chmod(tmpl.c_str(), mode) != 0) {  // no test may write elsewhere
      std::perror(("allocscope tests: mkdtemp " + tmpl).c_str());
      std::abort();
    }
    path = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw (a mount left busy by a failed test)
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace allocscope
