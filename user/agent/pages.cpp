#include "agent/pages.h"

#include <time.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/units.h"
#include "output/flame_text.h"

namespace allocscope {
namespace {

// The flame graph's escaping: all five specials, safe in text and attributes.
std::string html_escape(const std::string& s) {
  std::string out;
  flame::append_xml(out, s);
  return out;
}

std::string link(const std::string& href, const std::string& text) {
  return "<a href=\"" + html_escape(href) + "\">" + html_escape(text) + "</a>";
}

// RFC 3339, to the second, in UTC: 2026-11-27T01:02:03Z.
std::string rfc3339_utc(int64_t ns) {
  time_t seconds = time_t(ns / 1000000000);
  tm t{};
  gmtime_r(&seconds, &t);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &t);
  return buf;
}

std::string row_query(const TargetRow& r) {
  return r.pid ? "pid=" + std::to_string(r.pid) : "comm=" + percent_encode(r.comm);
}

}  // namespace

std::string percent_encode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string discovery_json(const std::vector<TargetRow>& rows, const std::string& host_port) {
  nlohmann::json groups = nlohmann::json::array();
  for (const TargetRow& r : rows) {
    nlohmann::json labels;
    if (r.pid) {
      labels["__param_pid"] = std::to_string(r.pid);
      labels["pid"] = std::to_string(r.pid);
      if (r.ns_pid) labels["ns_pid"] = std::to_string(r.ns_pid);
      if (r.start_wall_ns > 0) labels["start_time"] = rfc3339_utc(r.start_wall_ns);
    } else {
      labels["__param_comm"] = r.comm;
    }
    labels["comm"] = r.comm;
    // Pyroscope names a series by service_name: the unit when there is one.
    labels["service_name"] = r.labels.unit.empty() ? r.comm : r.labels.unit;
    for (auto [key, value] : {std::pair{"unit", &r.labels.unit}, std::pair{"container", &r.labels.container},
                              std::pair{"pod", &r.labels.pod}, std::pair{"cgroup", &r.labels.cgroup}})
      if (!value->empty()) labels[key] = *value;
    groups.push_back({{"targets", {host_port}}, {"labels", labels}});
  }
  // Names are arbitrary bytes: invalid UTF-8 is replaced, never thrown on.
  return groups.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string index_html(const std::vector<TargetRow>& rows, const std::string& version) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>allocscope agent</title>"
      "<style>body{font-family:sans-serif}td,th{padding:2px 10px;text-align:left}"
      "td.n{text-align:right}</style></head><body>\n<h1>allocscope agent</h1>\n<p>" +
      html_escape(version) + ". All processes: " + link("debug/pprof/heap", "heap") + " " +
      link("debug/pprof/allocs", "allocs") + " " +
      link("flamegraph?metric=inuse_space", "in-use flame graph") + " " + link("metrics", "metrics") + " " +
      link("targets", "targets (service discovery)") +
      "</p>\n<table>\n<tr><th>pid</th><th>program</th><th>unit</th><th>container</th>"
      "<th>live (est.)</th><th>allocated (est.)</th><th>profiles</th></tr>\n";
  for (const TargetRow& r : rows) {
    std::string q = row_query(r);
    h += "<tr><td>" + (r.pid ? std::to_string(r.pid) : std::string("all")) + "</td><td>" +
         html_escape(r.comm) + "</td><td>" + html_escape(r.labels.unit) + "</td><td>" +
         html_escape(r.labels.container.substr(0, 12)) + "</td><td class=n>" +
         html_escape(format_bytes(r.live_bytes)) + "</td><td class=n>" +
         html_escape(format_bytes(r.alloc_bytes)) + "</td><td>" + link("debug/pprof/heap?" + q, "heap") +
         " " + link("debug/pprof/allocs?" + q, "allocs") + " " +
         link("flamegraph?metric=inuse_space&" + q, "in-use flame graph") + " " +
         link("flamegraph?metric=alloc_space&" + q, "allocated flame graph") + "</td></tr>\n";
  }
  return h + "</table>\n</body></html>\n";
}

}  // namespace allocscope
