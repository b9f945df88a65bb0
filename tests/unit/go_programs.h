// Go programs built for a test with Debian's Go toolchain, their build cache
// kept in the build tree (GO_CACHE_DIR): a first build takes seconds, a
// cached one a fraction.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "temp_dir.h"

namespace allocscope {

// Builds `source` (one main package) in `dir` with `go build FLAGS` into
// dir/NAME; returns its path.
inline std::string build_go_program(const TempDir& dir, const std::string& name, const std::string& source,
                                    const std::string& flags) {
  std::string file = dir.path / (name + ".go"), binary = dir.path / name;
  std::ofstream(file) << source;
  std::string command = "cd " + dir.path.string() + " && HOME=" + dir.path.string() +
                        " GOCACHE=" GO_CACHE_DIR " GOFLAGS=-buildvcs=false GOTOOLCHAIN=local go build " +
                        flags + " -o " + binary + " " + file + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return binary;
}

}  // namespace allocscope
