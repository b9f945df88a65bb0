// libFuzzer: the text parsers of files read on behalf of other processes
// (/proc/PID/maps, stat, cgroup, mountinfo, perf maps) and of what users and
// HTTP clients send (sizes, durations, listen addresses, agent paths).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "agent/listen_address.h"
#include "agent/targets.h"
#include "base/units.h"
#include "base/utf8.h"
#include "host/perf_map.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "record/discovery/filter_verdicts.h"

using namespace allocscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto maps = parse_maps(text);
  for (const Mapping& m : maps) (void)find_mapping(maps, m.start + (m.end - m.start) / 2);
  auto symbols = parse_perf_map(text);
  if (!symbols.empty()) (void)find_jit_symbol(symbols, symbols.front().start);
  (void)parent_from_stat(text);
  std::string cgroup = cgroup_v2_path(text);
  (void)labels_from_cgroup(cgroup);
  (void)labels_from_cgroup(text);
  (void)cgroup_in_unit(text, "x.service");
  (void)cgroup2_mount(text);
  (void)parse_bytes(text);
  (void)parse_duration_ms(text);
  (void)parse_listen(text);
  (void)valid_utf8(text);
  std::multimap<std::string, std::string> params;
  size_t eq = text.find('=');
  if (eq != std::string_view::npos)
    params.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  (void)address(text, params);
  return 0;
}
