// Recording -> profile.proto, gzip-compressed.
#include <cerrno>
#include <set>
#include <string_view>

#include "base/utf8.h"
#include "model/loss.h"
#include "output/gzip.h"
#include "output/pprof.h"
#include "output/pprof_columns.h"
#include "output/pprof_sidecar.h"

namespace allocscope {
namespace {

using namespace pprof_columns;

// profile.proto stores every string once and refers to it by index; index 0
// is reserved for "".
class StringTable {
 public:
  explicit StringTable(pb::Profile& p) : p_(p) { intern(""); }

  int64_t intern(const std::string& raw) {
    const std::string s = valid_utf8(raw);
    auto [it, inserted] = index_.try_emplace(s, p_.string_table_size());
    if (inserted) p_.add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile& p_;
  std::unordered_map<std::string, int64_t> index_;
};

void add_value_type(pb::ValueType* vt, StringTable& strings, const char* type, const char* unit) {
  vt->set_type(strings.intern(type));
  vt->set_unit(strings.intern(unit));
}

// A handful of comments a pprof user reads (the tool, the rate, what was
// lost); the counters and paths travel in the sidecar (pprof_sidecar.h).
void add_header(pb::Profile& p, StringTable& strings, const Recording& r, std::string_view tool) {
  for (const ColumnType& c : kColumnTypes) add_value_type(p.add_sample_type(), strings, c.type, c.unit);
  add_value_type(p.mutable_period_type(), strings, "space", "bytes");
  p.set_period(count_value(r.rate));
  p.set_default_sample_type(strings.intern(metric_name(r.default_metric)));
  p.set_time_nanos(r.time_nanos);
  p.set_duration_nanos(r.duration_nanos);
  p.add_comment(strings.intern(std::string(tool)));
  p.add_comment(strings.intern("rate=" + std::to_string(r.rate)));
  if (std::string lost = describe_loss(r, r.default_metric); !lost.empty())
    p.add_comment(strings.intern("warning: " + lost));
}

// `name` as a regular expression that matches it alone (RE2's syntax, as
// pprof's Go regexp).
std::string literal_regex(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (std::string_view("\\.+*?()|[]{}^$").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// A function's name as pprof matches it against drop_frames: its argument
// list cut off, but for the parentheses of "(anonymous namespace)" and
// "operator()" (pprof's simplifyFunc).
std::string pprof_match_name(std::string_view name) {
  if (name.starts_with('.')) name.remove_prefix(1);
  for (size_t at = name.find('('); at != std::string_view::npos; at = name.find('(', at + 1)) {
    bool reserved = false;
    for (std::string_view kept : {"(anonymous namespace)", "operator()"}) {
      size_t from = kept.front() == '(' ? at : at >= 8 ? at - 8 : std::string_view::npos;
      if (from != std::string_view::npos && name.substr(from, kept.size()) == kept) reserved = true;
    }
    if (!reserved) return std::string(name.substr(0, at));
  }
  return std::string(name);
}

bool is_go_runtime(const std::string& name) {
  return name.starts_with("runtime.") || name.starts_with("internal/runtime/");
}

// The allocator entry points, each sample's leaf: pprof drops them (and any
// frame inside them) from what it shows, so that flat bytes land on the
// functions that called the allocator, as in Go's own heap profiles. Under
// Go's allocator, the runtime's frames next to it (runtime.makeslice,
// newobject) go too, as Go's own profiles hide them: by name, those met
// there. Only allocscope's own report keeps them all.
std::string allocator_frames(const Recording& r) {
  std::set<std::string> names;
  for (const RecSample& s : r.samples) {
    bool go = false;
    for (size_t i = 0; i < s.locations.size(); ++i) {
      bool runtime_only = true;
      for (const RecLine& line : r.locations[s.locations[i]].lines) {
        const std::string& name = r.functions[line.function].name;
        if (i == 0) {
          names.insert(pprof_match_name(name));
          go = go || is_go_runtime(name);
        } else if (go && is_go_runtime(name)) {
          names.insert(pprof_match_name(name));
        } else {
          runtime_only = false;
          break;
        }
      }
      if (i > 0 && (!go || !runtime_only)) break;
    }
  }
  std::string regex;
  for (const std::string& name : names) regex += (regex.empty() ? "" : "|") + literal_regex(name);
  return regex;
}

// What symbolization found in each mapping: pprof symbolizes again (from the
// binaries named in the file) only the mappings that lack functions.
void add_mapping_flags(pb::Profile& p, const Recording& r) {
  for (const RecLocation& l : r.locations) {
    if (l.mapping < 0 || l.lines.empty()) continue;
    pb::Mapping* m = p.mutable_mapping(l.mapping);
    m->set_has_functions(true);
    m->set_has_inline_frames(m->has_inline_frames() || l.lines.size() > 1);
    for (const RecLine& line : l.lines) {
      m->set_has_filenames(m->has_filenames() || !r.functions[line.function].filename.empty());
      m->set_has_line_numbers(m->has_line_numbers() || line.line != 0);
    }
  }
}

void add_mappings(pb::Profile& p, StringTable& strings, const Recording& r) {
  for (size_t i = 0; i < r.mappings.size(); ++i) {
    const RecMapping& rm = r.mappings[i];
    pb::Mapping* m = p.add_mapping();
    m->set_id(i + 1);
    m->set_memory_start(rm.start);
    m->set_memory_limit(rm.limit);
    m->set_file_offset(rm.offset);
    m->set_filename(strings.intern(rm.file));
    m->set_build_id(strings.intern(rm.build_id));
  }
  add_mapping_flags(p, r);
}

void add_functions(pb::Profile& p, StringTable& strings, const Recording& r) {
  for (size_t i = 0; i < r.functions.size(); ++i) {
    const RecFunction& rf = r.functions[i];
    pb::Function* f = p.add_function();
    f->set_id(i + 1);
    f->set_name(strings.intern(rf.name));
    f->set_system_name(strings.intern(rf.system_name));
    f->set_filename(strings.intern(rf.filename));
  }
}

void add_locations(pb::Profile& p, const Recording& r) {
  for (size_t i = 0; i < r.locations.size(); ++i) {
    const RecLocation& rl = r.locations[i];
    pb::Location* l = p.add_location();
    l->set_id(i + 1);
    l->set_mapping_id(rl.mapping < 0 ? 0 : static_cast<uint64_t>(rl.mapping) + 1);
    l->set_address(rl.address);
    for (const RecLine& rline : rl.lines) {
      pb::Line* line = l->add_line();
      line->set_function_id(uint64_t{rline.function} + 1);
      line->set_line(rline.line);
    }
  }
}

// Every sample is kept, zeros included: `report` counts samples, not only
// the stacks that still hold memory.
void add_samples(pb::Profile& p, StringTable& strings, const Recording& r) {
  const int64_t pid_key = strings.intern("pid");
  const int64_t comm_key = strings.intern("comm");
  int64_t ns_pid_key = 0;  // interned when a sample has one
  for (const RecSample& rs : r.samples) {
    pb::Sample* s = p.add_sample();
    for (uint32_t loc : rs.locations) s->add_location_id(uint64_t{loc} + 1);
    for (int64_t v : column_values(rs.totals)) s->add_value(v);
    pb::Label* pid = s->add_label();
    pid->set_key(pid_key);
    pid->set_num(rs.pid);
    if (rs.ns_pid) {  // a container's own name for the process
      if (!ns_pid_key) ns_pid_key = strings.intern("ns_pid");
      pb::Label* ns = s->add_label();
      ns->set_key(ns_pid_key);
      ns->set_num(rs.ns_pid);
    }
    // A label whose str is 0 ("") reads as numeric in pprof: leave it out.
    if (!rs.comm.empty()) {
      pb::Label* comm = s->add_label();
      comm->set_key(comm_key);
      comm->set_str(strings.intern(rs.comm));
    }
    for (const auto& [key, value] : rs.labels) {
      if (value.empty()) continue;
      pb::Label* l = s->add_label();
      l->set_key(strings.intern(key));
      l->set_str(strings.intern(value));
    }
  }
}

}  // namespace

Result<std::string> encode_pprof(const Recording& r, std::string_view tool) {
  pb::Profile p;
  StringTable strings(p);
  add_header(p, strings, r, tool);
  add_mappings(p, strings, r);
  add_functions(p, strings, r);
  add_locations(p, r);
  add_samples(p, strings, r);
  // A profile read keeps its own (another tool's leaves are no allocator).
  std::string drop = r.drop_frames ? *r.drop_frames : allocator_frames(r);
  if (!drop.empty()) p.set_drop_frames(strings.intern(drop));
  strings.intern(encode_sidecar(r));  // referred to by nothing: pprof never shows it
  std::string raw;
  if (!p.SerializeToString(&raw)) return fail("pprof: the profile is over protobuf's 2 GiB limit", EFBIG);
  return gzip(raw);
}

}  // namespace allocscope
