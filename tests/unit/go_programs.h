// Go programs built for a test with Debian's Go toolchain (and the newest
// Debian release's, NEWER_GO), their build cache kept in the build tree
// (GO_CACHE_DIR): a first build takes seconds, a cached one a fraction.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace allocscope {

// The go commands to build with: the machine's, and the newer one CMake was
// given (./dev.sh fetches trixie's); a test without it fails, saying so.
inline std::vector<std::string> go_toolchains() {
  std::vector<std::string> out = {"go"};
  if (std::string newer = NEWER_GO; !newer.empty())
    out.push_back(newer);
  else
    ADD_FAILURE()
        << "no newer Go to build with: configure with -DALLOCSCOPE_NEWER_GO=$(tests/go/fetch.sh 1.24 "
           "DIR) (./dev.sh does)";
  return out;
}

// Builds `source` (one main package) in `dir` with `GO build FLAGS` into
// dir/NAME; returns its path.
inline std::string build_go_program(const TempDir& dir, const std::string& name, const std::string& source,
                                    const std::string& flags, const std::string& go = "go") {
  std::string file = dir.path / (name + ".go"), binary = dir.path / name;
  std::ofstream(file) << source;
  std::string command = "cd " + dir.path.string() + " && HOME=" + dir.path.string() +
                        " GOCACHE=" GO_CACHE_DIR " GOFLAGS=-buildvcs=false GOTOOLCHAIN=local " + go +
                        " build " + flags + " -o " + binary + " " + file + " 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return binary;
}

}  // namespace allocscope
