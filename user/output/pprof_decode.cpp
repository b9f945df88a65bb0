// profile.proto (gzip-compressed or raw) -> Recording, every reference checked.
#include <google/protobuf/stubs/common.h>

#include <charconv>
#include <new>
#include <string_view>
#include <unordered_map>

#include "output/gzip.h"
#include "output/pprof.h"
#include "output/pprof_columns.h"
#include "output/pprof_sidecar.h"
#include "output/sample_labels.h"

namespace allocscope {
namespace {

using namespace pprof_columns;

// Bounds a decompressed profile: a small gzip file must not be able to make
// us allocate without limit, and the parsed message takes several times the
// bytes it was parsed from. 256 MiB holds millions of samples.
constexpr size_t kMaxProfileBytes = size_t{256} << 20;

Result<pb::Profile> parse_profile(std::string_view data) {
  const bool gzipped = data.size() >= 2 && data[0] == '\x1f' && data[1] == '\x8b';
  std::string inflated;
  if (gzipped) {
    auto raw = gunzip(data, kMaxProfileBytes);
    if (!raw) return fail("not a pprof profile: " + raw.error().message, raw.error().code);
    inflated = std::move(*raw);
    data = inflated;
  }
  if (data.size() > kMaxProfileBytes) return fail("not a pprof profile: over 256 MiB");
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
      if (auto ok = (this->*step)(); !ok) return fail("not a pprof profile: " + ok.error().message);
    sidecar();
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
    if (id == 0) return fail(std::string(what) + " with id 0");
    if (!index.try_emplace(id, static_cast<uint32_t>(index.size())).second)
      return fail(std::string("duplicate ") + what + " id " + std::to_string(id));
    return {};
  }

  static Result<uint32_t> lookup(const std::unordered_map<uint64_t, uint32_t>& index, uint64_t id,
                                 const char* what) {
    auto it = index.find(id);
    if (it == index.end()) return fail(std::string("unknown ") + what + " id " + std::to_string(id));
    return it->second;
  }

  Step columns() {
    column_.fill(-1);
    for (int i = 0; i < p_.sample_type_size(); ++i) {
      auto type = str(p_.sample_type(i).type(), "sample type");
      auto unit = str(p_.sample_type(i).unit(), "sample unit");
      if (!type || !unit) return fail(type ? unit.error() : type.error());
      for (size_t c = 0; c < kColumns; ++c) {
        if (*type != kColumnTypes[c].type || column_[c] >= 0) continue;
        if (*unit != kColumnTypes[c].unit)
          return fail("sample type " + *type + " in " + *unit + ", not " + kColumnTypes[c].unit);
        column_[c] = i;
      }
    }
    for (size_t c = AllocObjects; c <= InuseSpace; ++c)
      if (column_[c] >= 0) return {};
    return fail("no alloc_objects, alloc_space, inuse_objects or inuse_space sample type");
  }

  // The default metric: pprof falls back on the last sample type when the
  // file names none (Go's heap profiles: inuse_space).
  Step default_metric() {
    std::string name;
    if (p_.default_sample_type() != 0) {
      auto s = str(p_.default_sample_type(), "default_sample_type");
      if (!s) return fail(s.error());
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
      if (!text) return fail(text.error());
      if (text->starts_with(kPathComment)) {
        size_t eq = text->find('=');
        if (eq != std::string::npos)
          r_.paths.emplace_back(text->substr(kPathComment.size(), eq - kPathComment.size()),
                                text->substr(eq + 1));
        continue;
      }
      size_t eq = text->rfind('=');
      if (eq == std::string::npos || eq == 0) continue;
      std::string_view name(text->data(), eq), digits(text->data() + eq + 1, text->size() - eq - 1);
      uint64_t value = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() && name != "rate")
        r_.counters.emplace_back(std::string(name), value);
    }
    return {};
  }

  Step header() {
    if (p_.period() < 0) return fail("negative period " + std::to_string(p_.period()));
    r_.rate = static_cast<uint64_t>(p_.period());
    r_.time_nanos = p_.time_nanos();
    r_.duration_nanos = p_.duration_nanos();
    auto drop = str(p_.drop_frames(), "drop_frames");
    if (!drop) return fail(drop.error());
    r_.drop_frames = *drop;
    if (auto ok = default_metric(); !ok) return ok;
    return counters();
  }

  Step mappings() {
    for (const pb::Mapping& m : p_.mapping()) {
      auto file = str(m.filename(), "mapping filename");
      auto build_id = str(m.build_id(), "mapping build_id");
      if (!file || !build_id) return fail(file ? build_id.error() : file.error());
      if (auto ok = index_id(mapping_index_, m.id(), "mapping"); !ok) return ok;
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
      if (auto ok = index_id(function_index_, f.id(), "function"); !ok) return ok;
      r_.functions.push_back({*name, *system_name, *filename});
    }
    return {};
  }

  Step location(const pb::Location& l) {
    RecLocation rl;
    rl.address = l.address();
    if (l.mapping_id() != 0) {
      auto m = lookup(mapping_index_, l.mapping_id(), "mapping");
      if (!m) return fail(m.error());
      rl.mapping = static_cast<int32_t>(*m);
    }
    for (const pb::Line& line : l.line()) {
      auto f = lookup(function_index_, line.function_id(), "function");
      if (!f) return fail(f.error());
      rl.lines.push_back({*f, line.line()});
    }
    r_.locations.push_back(std::move(rl));
    return {};
  }

  Step locations() {
    for (const pb::Location& l : p_.location()) {
      if (auto ok = index_id(location_index_, l.id(), "location"); !ok) return ok;
      if (auto ok = location(l); !ok) return ok;
    }
    return {};
  }

  // pid, comm and string labels; numeric ones other than ours (e.g. Go's
  // "bytes") are ignored.
  Step labels(const pb::Sample& s, RecSample& rs) {
    for (const pb::Label& label : s.label()) {
      auto key = str(label.key(), "label key");
      auto value = str(label.str(), "label value");
      if (!key || !value) return fail(key ? value.error() : key.error());
      if (*key == "pid" && label.num() >= 0 && label.num() <= UINT32_MAX)
        rs.pid = static_cast<uint32_t>(label.num());
      else if (*key == "pid")
        return fail("pid label " + std::to_string(label.num()) + " out of range");
      else if (*key == "ns_pid" && label.num() > 0 && label.num() <= UINT32_MAX)
        rs.ns_pid = static_cast<uint32_t>(label.num());
      else if (*key == "comm")
        rs.comm = *value;
      else if (!value->empty())
        rs.labels.emplace_back(*key, *value);
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
    if (at(Samples) < 0 || at(LiveSamples) < 0) return fail("negative sample count");
    t.alloc_objects = static_cast<double>(at(AllocObjects));
    t.alloc_bytes = static_cast<double>(at(AllocSpace));
    t.live_objects = static_cast<double>(at(InuseObjects));
    t.live_bytes = static_cast<double>(at(InuseSpace));
    t.samples = static_cast<uint64_t>(at(Samples));
    t.live_samples = static_cast<uint64_t>(at(LiveSamples));
    return {};
  }

  // allocscope's own figures (pprof_sidecar.h), where the file has them;
  // files of earlier versions keep them in comments and labels.
  void sidecar() {
    for (const std::string& entry : p_.string_table())
      if (entry.starts_with(kSidecarMagic)) {
        apply_sidecar(entry, r_);
        return;
      }
  }

  Step samples() {
    for (const pb::Sample& s : p_.sample()) {
      RecSample rs;
      for (uint64_t id : s.location_id()) {
        auto loc = lookup(location_index_, id, "location");
        if (!loc) return fail(loc.error());
        rs.locations.push_back(*loc);
      }
      if (auto ok = labels(s, rs); !ok) return ok;
      if (auto ok = totals(s, rs.totals); !ok) return ok;
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

Result<Recording> decode_pprof(std::string_view data) {
  // Within the bounds a profile may still describe more than memory holds
  // (a process under a limit): refused as any malformed input is.
  try {
    auto p = parse_profile(data);
    if (!p) return fail(p.error());
    return Decoder(*p).run();
  } catch (const std::bad_alloc&) {
    return fail("not a pprof profile: too large for the memory allocscope may take", ENOMEM);
  }
}

}  // namespace allocscope
