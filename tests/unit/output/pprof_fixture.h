// What the pprof tests share: a recording that exercises every part of a
// profile, and the profile.proto message our gzipped files hold.
#pragma once

#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/recording.h"
#include "profile.pb.h"

namespace allocscope {

namespace pb = perftools::profiles;

// Two processes, three mappings (one without a build id), an inlined call,
// an unsymbolized frame, five samples (one that rounds to all zeros).
inline Recording synthetic() {
  Recording r;
  r.rate = 512 * 1024;
  r.time_nanos = 1'700'000'000'123'456'789;
  r.duration_nanos = 2'500'000'000;
  r.default_metric = Metric::InuseSpace;
  r.counters = {
      {"samples", 17}, {"stacks_full", 0}, {"live_full", 2}, {"unmatched_frees", 5}, {"replaced_live", 1}};
  r.paths = {{"kernel", "6.1.0-56-amd64"}, {"probes", "classic uprobes and uretprobes (no uprobe sessions)"}};
  r.mappings = {
      {0x555555554000, 0x555555600000, 0, "/usr/bin/server", "aa11bb22cc33"},
      {0x7ffff7d80000, 0x7ffff7f00000, 0x28000, "/usr/lib/x86_64-linux-gnu/libc.so.6", "bb22"},
      {0x7ffff7a00000, 0x7ffff7c00000, 0x9a000, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", ""},
  };
  r.functions = {
      {"malloc", "malloc", ""},
      {"calloc", "calloc", ""},
      {"operator new(unsigned long)", "_Znwm", ""},
      {"server::handle_request(int)", "_ZN6server14handle_requestEi", "server.cc"},
      {"server::parse_header()", "_ZN6server12parse_headerEv", "parse.h"},
      {"main", "main", "main.cc"},
      {"worker_loop", "worker_loop", "worker.cc"},
  };
  r.locations = {
      {1, 0x7ffff7da1230, {{0, 0}}},
      {1, 0x7ffff7da2340, {{1, 0}}},
      {2, 0x7ffff7a9b450, {{2, 0}}},
      {0, 0x555555555560, {{4, 42}, {3, 120}}},  // parse_header inlined into handle_request
      {0, 0x555555555670, {{5, 10}}},
      {0, 0x555555555780, {{6, 55}}},
      {-1, 0x1234, {}},
  };
  auto sample = [](std::vector<uint32_t> locs, uint32_t pid, std::string comm, StackTotals t) {
    return RecSample{std::move(locs), pid, std::move(comm), t, {}};
  };
  r.samples = {
      sample({0, 3, 4}, 100, "server", {3.4, 1572864.5, 1.6, 524288.49, 3, 1}),
      sample({2, 3, 4}, 100, "server", {1, 600000.5, 1, 600000.5, 1, 1}),
      sample({1, 4}, 100, "server", {2, 1048576, 0, 0, 2, 0}),
      sample({0, 5}, 200, "worker", {10.5, 5242880, 10.5, 5242880, 10, 10}),
      sample({0, 6, 5}, 200, "worker", {0.4, 0.4, 0.2, 0.2, 0, 0}),
  };
  r.samples[3].ns_pid = 7;  // a worker in a container: pid 7 there
  r.samples[4].ns_pid = 7;
  return r;
}

inline StackTotals rounded(const StackTotals& t) {
  return {std::round(t.alloc_objects),
          std::round(t.alloc_bytes),
          std::round(t.live_objects),
          std::round(t.live_bytes),
          t.samples,
          t.live_samples};
}

inline pb::Profile gunzip_message(const std::string& gz) {
  google::protobuf::io::ArrayInputStream in(gz.data(), static_cast<int>(gz.size()));
  google::protobuf::io::GzipInputStream unzipped(&in, google::protobuf::io::GzipInputStream::GZIP);
  pb::Profile p;
  EXPECT_TRUE(p.ParseFromZeroCopyStream(&unzipped));
  return p;
}

inline const std::string& str(const pb::Profile& p, int64_t i) { return p.string_table(static_cast<int>(i)); }

}  // namespace allocscope
