// A private directory under /tmp for one test, removed with its contents.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace allocscope {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name = "allocscope-test") {
    std::string tmpl = "/tmp/" + name + "-XXXXXX";
    path = mkdtemp(tmpl.data());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;  // a destructor must not throw (a mount left busy by a failed test)
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace allocscope
