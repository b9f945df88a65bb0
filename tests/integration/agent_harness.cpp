#include "agent_harness.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "host/process.h"

namespace allocscope::test {

Sites parse_raw(const std::string& raw) {
  std::map<std::string, std::string> site_of_location;  // location id -> its site_* function
  std::istringstream in(raw.substr(raw.find("\nLocations")));
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(": 0x"), site = line.find(" site_");
    if (colon == std::string::npos || site == std::string::npos) continue;
    std::string id = line.substr(line.find_first_not_of(' '), colon - line.find_first_not_of(' '));
    site_of_location[id] = line.substr(site + 1, line.find(' ', site + 1) - site - 1);
  }
  Sites sites;
  std::istringstream samples(raw.substr(0, raw.find("\nLocations")));
  for (std::string line; std::getline(samples, line);) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos || line.find('[') != std::string::npos) continue;
    std::istringstream values(line.substr(0, colon)), locations(line.substr(colon + 2));
    SiteValues v;
    if (!(values >> v.alloc_objects >> v.alloc_bytes >> v.inuse_objects >> v.inuse_bytes)) continue;
    for (std::string id; locations >> id;)
      if (auto it = site_of_location.find(id); it != site_of_location.end()) {
        SiteValues& s = sites[it->second];
        s.alloc_objects += v.alloc_objects;
        s.alloc_bytes += v.alloc_bytes;
        s.inuse_objects += v.inuse_objects;
        s.inuse_bytes += v.inuse_bytes;
        break;
      }
  }
  return sites;
}

// `go tool pprof` (a real client of Go's net/http/pprof) on one URL.
RunResult go_pprof(const std::string& how, const std::string& url) {
  std::string tmp = temp_path("pprof-tmp");
  std::filesystem::create_directories(tmp);
  return run({"env", "PPROF_TMPDIR=" + tmp, "HOME=" + tmp, "go", "tool", "pprof", how, url}, 120000);
}

// Each site's allocated and in-use bytes within kMaxZ standard deviations of
// the truth for `threads` x `scale` runs of the workload.
void expect_sites_match(const Sites& sites, int scale, const std::string& what, bool check_live) {
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, 1, scale);
    const SiteValues& v = sites.count(s.function) ? sites.at(s.function) : SiteValues{};
    double sd = ht_sigma(t.objects, double(s.size), kRate, true) + 1 + 1e-6 * t.bytes;
    EXPECT_LT(std::fabs(v.alloc_bytes - t.bytes) / sd, kMaxZ)
        << what << " " << s.function << " alloc_space " << v.alloc_bytes << " truth " << t.bytes;
    if (!check_live) continue;
    double live_sd = ht_sigma(t.live_objects, double(s.size), kRate, true) + 1 + 1e-6 * t.live_bytes;
    EXPECT_LT(std::fabs(v.inuse_bytes - t.live_bytes) / live_sd, kMaxZ)
        << what << " " << s.function << " inuse_space " << v.inuse_bytes << " truth " << t.live_bytes;
  }
}

std::string cgroup_root() {
  auto mountinfo = read_text_file("/proc/self/mountinfo");
  return mountinfo ? cgroup2_mount(*mountinfo) : "";
}

}  // namespace allocscope::test
