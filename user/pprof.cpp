#include "pprof.h"

#include "loss.h"

#include "sample_labels.h"

#include <google/protobuf/stubs/common.h>
#include <zlib.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <unordered_map>

#include "profile.pb.h"

namespace allocscope {
namespace {

namespace pb = perftools::profiles;

// The value columns, in the order encode_pprof writes them.
enum Column : size_t { AllocObjects, AllocSpace, InuseObjects, InuseSpace, Samples, LiveSamples, kColumns };

struct ColumnType {
  const char* type;
  const char* unit;
};
constexpr std::array<ColumnType, kColumns> kColumnTypes = {{{"alloc_objects", "count"},
                                                            {"alloc_space", "bytes"},
                                                            {"inuse_objects", "count"},
                                                            {"inuse_space", "bytes"},
                                                            {"samples", "count"},
                                                            {"live_samples", "count"}}};

// Bounds a decompressed profile: protobuf parses at most INT_MAX bytes, and a
// small gzip file must not be able to make us allocate without limit.
constexpr size_t kMaxProfileBytes = size_t{1} << 30;

// llround is undefined outside int64's range and for NaN; an estimate there
// is already meaningless, so it saturates rather than crash a report.
int64_t round_value(double v) {
  constexpr double kLimit = 9.2e18;
  if (std::isnan(v))
    return 0;
  if (v >= kLimit)
    return INT64_MAX;
  if (v <= -kLimit)
    return INT64_MIN;
  return std::llround(v);
}

int64_t count_value(uint64_t n) { return n > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(n); }

std::array<int64_t, kColumns> column_values(const StackTotals& t) {
  return {round_value(t.alloc_objects), round_value(t.alloc_bytes), round_value(t.live_objects),
          round_value(t.live_bytes),    count_value(t.samples),      count_value(t.live_samples)};
}

// ---- encoding ----

// Length of the well-formed UTF-8 sequence that starts s (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF), 0 when there is none.
size_t utf8_sequence_length(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80)
    return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    lo = c == 0xE0 ? 0xA0 : lo;
    hi = c == 0xED ? 0x9F : hi;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    lo = c == 0xF0 ? 0x90 : lo;
    hi = c == 0xF4 ? 0x8F : hi;
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi)
    return 0;
  for (size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xBF)
      return 0;
  return n;
}

// profile.proto's strings are proto3 `string`s: protobuf refuses to parse a
// message holding invalid UTF-8 (so our own decoder would reject the file),
// yet comm and paths are arbitrary bytes. Invalid bytes become U+FFFD.
std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s.substr(i));
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

// profile.proto stores every string once and refers to it by index; index 0
// is reserved for "".
class StringTable {
 public:
  explicit StringTable(pb::Profile& p) : p_(p) { intern(""); }

  int64_t intern(const std::string& raw) {
    const std::string s = valid_utf8(raw);
    auto [it, inserted] = index_.try_emplace(s, p_.string_table_size());
    if (inserted)
      p_.add_string_table(s);
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

// The counters go in comments: pprof shows them to the user, and profile.proto
// has no other place for them that readers keep.
void add_header(pb::Profile& p, StringTable& strings, const Recording& r, std::string_view tool) {
  for (const ColumnType& c : kColumnTypes)
    add_value_type(p.add_sample_type(), strings, c.type, c.unit);
  add_value_type(p.mutable_period_type(), strings, "space", "bytes");
  p.set_period(count_value(r.rate));
  p.set_default_sample_type(strings.intern(metric_name(r.default_metric)));
  p.set_time_nanos(r.time_nanos);
  p.set_duration_nanos(r.duration_nanos);
  p.add_comment(strings.intern(std::string(tool)));
  p.add_comment(strings.intern("rate=" + std::to_string(r.rate)));
  for (const auto& [name, value] : r.counters)
    p.add_comment(strings.intern(name + "=" + std::to_string(value)));
  if (std::string lost = describe_loss(r, r.default_metric); !lost.empty())
    p.add_comment(strings.intern("warning: " + lost));
}

// What symbolization found in each mapping: pprof symbolizes again (from the
// binaries named in the file) only the mappings that lack functions.
void add_mapping_flags(pb::Profile& p, const Recording& r) {
  for (const RecLocation& l : r.locations) {
    if (l.mapping < 0 || l.lines.empty())
      continue;
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
  for (const RecSample& rs : r.samples) {
    pb::Sample* s = p.add_sample();
    for (uint32_t loc : rs.locations)
      s->add_location_id(uint64_t{loc} + 1);
    for (int64_t v : column_values(rs.totals))
      s->add_value(v);
    pb::Label* pid = s->add_label();
    pid->set_key(pid_key);
    pid->set_num(rs.pid);
    // A label whose str is 0 ("") reads as numeric in pprof: leave it out.
    if (!rs.comm.empty()) {
      pb::Label* comm = s->add_label();
      comm->set_key(comm_key);
      comm->set_str(strings.intern(rs.comm));
    }
    for (const NumLabel& extra : extra_labels(rs.totals)) {
      pb::Label* l = s->add_label();
      l->set_key(strings.intern(extra.key));
      l->set_num(extra.num);
      if (*extra.unit)
        l->set_num_unit(strings.intern(extra.unit));
    }
  }
}

// gzip, the wrapper pprof writes and expects (windowBits 15 + 16).
std::string gzip(const std::string& raw) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::bad_alloc();
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);  // one call: the buffer holds the worst case
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END)
    throw std::runtime_error("pprof: gzip compression failed");
  return out;
}

// ---- decoding ----

// Inflates a whole gzip stream. zlib directly rather than protobuf's
// GzipInputStream, which reports a truncated stream as a clean end of data:
// a cut file would then decode as a smaller profile instead of failing.
Result<std::string> gunzip(std::string_view gz) {
  if (gz.size() > kMaxProfileBytes)
    return fail("not a pprof profile: over 1 GiB");
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK)
    return fail("not a pprof profile: gzip: out of memory");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  int rc = Z_OK;
  while (rc == Z_OK && out.size() <= kMaxProfileBytes) {
    char buf[1 << 16];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
  }
  std::string cause = rc == Z_OK          ? "over 1 GiB uncompressed"
                      : rc == Z_BUF_ERROR ? "truncated"
                      : z.msg             ? z.msg
                                          : "corrupt";
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    return fail("not a pprof profile: gzip: " + cause);
  return out;
}

Result<pb::Profile> parse_profile(std::string_view data) {
  const bool gzipped = data.size() >= 2 && data[0] == '\x1f' && data[1] == '\x8b';
  std::string inflated;
  if (gzipped) {
    auto raw = gunzip(data);
    if (!raw)
      return fail(raw.error());
    inflated = std::move(*raw);
    data = inflated;
  }
  if (data.size() > kMaxProfileBytes)
    return fail("not a pprof profile: over 1 GiB");
  pb::Profile p;
  bool parsed = false;
  {
#if GOOGLE_PROTOBUF_VERSION < 4022000
    // protobuf logs to stderr why it rejects a message; the error we return
    // says it already. (Protobuf 22 and later log through Abseil instead.)
    google::protobuf::LogSilencer quiet;
#endif
    parsed = p.ParseFromArray(data.data(), static_cast<int>(data.size()));
  }
  if (!parsed)
    return fail(std::string("not a pprof profile: not a valid profile.proto message") +
                (gzipped ? " (malformed, or a string not UTF-8)" : " (nor gzip data)"));
  if (p.string_table_size() == 0 || !p.string_table(0).empty())
    return fail("not a pprof profile: string_table[0] is not \"\"");
  return p;
}

// Builds a Recording from a parsed message, checking every reference: a
// message that parses is not yet a valid profile (random bytes often parse).
class Decoder {
 public:
  explicit Decoder(const pb::Profile& p) : p_(p) {}

  Result<Recording> run() {
    for (auto step : {&Decoder::columns, &Decoder::header, &Decoder::mappings, &Decoder::functions,
                      &Decoder::locations, &Decoder::samples})
      if (auto ok = (this->*step)(); !ok)
        return fail("not a pprof profile: " + ok.error());
    return std::move(r_);
  }

 private:
  using Step = Result<void>;

  Result<std::string> str(int64_t i, const char* what) const {
    if (i < 0 || i >= p_.string_table_size())
      return fail(std::string(what) + " refers to string " + std::to_string(i) + " of " +
                  std::to_string(p_.string_table_size()));
    return p_.string_table(static_cast<int>(i));
  }

  // Profile ids are arbitrary non-zero numbers; ours are index + 1, others'
  // need not be.
  static Step index_id(std::unordered_map<uint64_t, uint32_t>& index, uint64_t id, const char* what) {
    if (id == 0)
      return fail(std::string(what) + " with id 0");
    if (!index.try_emplace(id, static_cast<uint32_t>(index.size())).second)
      return fail(std::string("duplicate ") + what + " id " + std::to_string(id));
    return {};
  }

  static Result<uint32_t> lookup(const std::unordered_map<uint64_t, uint32_t>& index, uint64_t id,
                                 const char* what) {
    auto it = index.find(id);
    if (it == index.end())
      return fail(std::string("unknown ") + what + " id " + std::to_string(id));
    return it->second;
  }

  Step columns() {
    column_.fill(-1);
    for (int i = 0; i < p_.sample_type_size(); ++i) {
      auto type = str(p_.sample_type(i).type(), "sample type");
      auto unit = str(p_.sample_type(i).unit(), "sample unit");
      if (!type || !unit)
        return fail(type ? unit.error() : type.error());
      for (size_t c = 0; c < kColumns; ++c) {
        if (*type != kColumnTypes[c].type || column_[c] >= 0)
          continue;
        if (*unit != kColumnTypes[c].unit)
          return fail("sample type " + *type + " in " + *unit + ", not " + kColumnTypes[c].unit);
        column_[c] = i;
      }
    }
    for (size_t c = AllocObjects; c <= InuseSpace; ++c)
      if (column_[c] >= 0)
        return {};
    return fail("no alloc_objects, alloc_space, inuse_objects or inuse_space sample type");
  }

  // The default metric: pprof falls back on the last sample type when the
  // file names none (Go's heap profiles: inuse_space).
  Step default_metric() {
    std::string name;
    if (p_.default_sample_type() != 0) {
      auto s = str(p_.default_sample_type(), "default_sample_type");
      if (!s)
        return fail(s.error());
      name = *s;
    } else if (p_.sample_type_size() > 0) {
      name = p_.string_table(static_cast<int>(p_.sample_type(p_.sample_type_size() - 1).type()));
    }
    r_.default_metric = parse_metric(name).value_or(Metric::AllocSpace);
    return {};
  }

  // Counters are the "name=value" comments; the tool comment has no '=' and
  // the rate is read from the period.
  Step counters() {
    for (int64_t i : p_.comment()) {
      auto text = str(i, "comment");
      if (!text)
        return fail(text.error());
      size_t eq = text->rfind('=');
      if (eq == std::string::npos || eq == 0)
        continue;
      std::string_view name(text->data(), eq), digits(text->data() + eq + 1, text->size() - eq - 1);
      uint64_t value = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && name != "rate")
        r_.counters.emplace_back(std::string(name), value);
    }
    return {};
  }

  Step header() {
    if (p_.period() < 0)
      return fail("negative period " + std::to_string(p_.period()));
    r_.rate = static_cast<uint64_t>(p_.period());
    r_.time_nanos = p_.time_nanos();
    r_.duration_nanos = p_.duration_nanos();
    if (auto ok = default_metric(); !ok)
      return ok;
    return counters();
  }

  Step mappings() {
    for (const pb::Mapping& m : p_.mapping()) {
      auto file = str(m.filename(), "mapping filename");
      auto build_id = str(m.build_id(), "mapping build_id");
      if (!file || !build_id)
        return fail(file ? build_id.error() : file.error());
      if (auto ok = index_id(mapping_index_, m.id(), "mapping"); !ok)
        return ok;
      r_.mappings.push_back({m.memory_start(), m.memory_limit(), m.file_offset(), *file, *build_id});
    }
    return {};
  }

  Step functions() {
    for (const pb::Function& f : p_.function()) {
      auto name = str(f.name(), "function name");
      auto system_name = str(f.system_name(), "function system_name");
      auto filename = str(f.filename(), "function filename");
      if (!name || !system_name || !filename)
        return fail(!name ? name.error() : !system_name ? system_name.error() : filename.error());
      if (auto ok = index_id(function_index_, f.id(), "function"); !ok)
        return ok;
      r_.functions.push_back({*name, *system_name, *filename});
    }
    return {};
  }

  Step location(const pb::Location& l) {
    RecLocation rl;
    rl.address = l.address();
    if (l.mapping_id() != 0) {
      auto m = lookup(mapping_index_, l.mapping_id(), "mapping");
      if (!m)
        return fail(m.error());
      rl.mapping = static_cast<int32_t>(*m);
    }
    for (const pb::Line& line : l.line()) {
      auto f = lookup(function_index_, line.function_id(), "function");
      if (!f)
        return fail(f.error());
      rl.lines.push_back({*f, line.line()});
    }
    r_.locations.push_back(std::move(rl));
    return {};
  }

  Step locations() {
    for (const pb::Location& l : p_.location()) {
      if (auto ok = index_id(location_index_, l.id(), "location"); !ok)
        return ok;
      if (auto ok = location(l); !ok)
        return ok;
    }
    return {};
  }

  // pid and comm from the labels; others (e.g. Go's "bytes") are ignored.
  Step labels(const pb::Sample& s, RecSample& rs) {
    for (const pb::Label& label : s.label()) {
      auto key = str(label.key(), "label key");
      auto value = str(label.str(), "label value");
      if (!key || !value)
        return fail(key ? value.error() : key.error());
      if (*key == "pid" && label.num() >= 0 && label.num() <= UINT32_MAX)
        rs.pid = static_cast<uint32_t>(label.num());
      else if (*key == "pid")
        return fail("pid label " + std::to_string(label.num()) + " out of range");
      else if (*key == "comm")
        rs.comm = *value;
      else
        apply_extra_label(*key, label.num(), rs.totals);
    }
    return {};
  }

  Step totals(const pb::Sample& s, StackTotals& t) {
    if (s.value_size() != p_.sample_type_size())
      return fail("a sample has " + std::to_string(s.value_size()) + " values for " +
                  std::to_string(p_.sample_type_size()) + " sample types");
    auto at = [&](Column c) { return column_[c] < 0 ? 0 : s.value(column_[c]); };
    if (at(Samples) < 0 || at(LiveSamples) < 0)
      return fail("negative sample count");
    t.alloc_objects = static_cast<double>(at(AllocObjects));
    t.alloc_bytes = static_cast<double>(at(AllocSpace));
    t.live_objects = static_cast<double>(at(InuseObjects));
    t.live_bytes = static_cast<double>(at(InuseSpace));
    t.samples = static_cast<uint64_t>(at(Samples));
    t.live_samples = static_cast<uint64_t>(at(LiveSamples));
    return {};
  }

  Step samples() {
    for (const pb::Sample& s : p_.sample()) {
      RecSample rs;
      for (uint64_t id : s.location_id()) {
        auto loc = lookup(location_index_, id, "location");
        if (!loc)
          return fail(loc.error());
        rs.locations.push_back(*loc);
      }
      if (auto ok = labels(s, rs); !ok)
        return ok;
      if (auto ok = totals(s, rs.totals); !ok)
        return ok;
      r_.samples.push_back(std::move(rs));
    }
    return {};
  }

  const pb::Profile& p_;
  Recording r_;
  std::array<int, kColumns> column_{};  // index into Sample.value, -1 when absent
  std::unordered_map<uint64_t, uint32_t> mapping_index_, function_index_, location_index_;
};

}  // namespace

std::string encode_pprof(const Recording& r, std::string_view tool) {
  pb::Profile p;
  StringTable strings(p);
  add_header(p, strings, r, tool);
  add_mappings(p, strings, r);
  add_functions(p, strings, r);
  add_locations(p, r);
  add_samples(p, strings, r);
  std::string raw;
  if (!p.SerializeToString(&raw))
    throw std::length_error("pprof: profile over protobuf's 2 GiB limit");
  return gzip(raw);
}

Result<Recording> decode_pprof(std::string_view data) {
  auto p = parse_profile(data);
  if (!p)
    return fail(p.error());
  return Decoder(*p).run();
}

}  // namespace allocscope
