#include "record/output_writer.h"

#include <sys/stat.h>

#include <string>

#include "output/outputs.h"
#include "output/pprof.h"

namespace allocscope {

Recording saved_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins) {
  Recording r = build_recording(profile, symbolizer, meta, origins);
  auto encoded = encode_pprof(r);
  if (!encoded) return r;  // a pprof output, if asked for, fails and says why
  auto saved = decode_pprof(*encoded);
  return saved ? *saved : r;
}

namespace {

RenderOptions render_options(const RecordConfig& config, Metric metric) {
  RenderOptions o = config.render;
  o.metric = metric;
  o.tool = std::string("allocscope ") + ALLOCSCOPE_VERSION_STRING;
  return o;
}

bool is_device_or_stdout(const std::string& path) {
  struct stat st;
  return path == "-" || (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode));
}

}  // namespace

Result<void> write_record_outputs(const Recording& recording, const RecordConfig& config, unsigned number) {
  std::vector<OutputSpec> outputs = config.outputs;
  if (number)
    for (OutputSpec& o : outputs) o.path = numbered_path(o.path, number);
  return write_outputs(recording, outputs, render_options(config, config.metric));
}

Result<void> write_tagged_outputs(const Recording& recording, const RecordConfig& config,
                                  const std::string& tag) {
  std::vector<OutputSpec> outputs;
  for (OutputSpec o : config.outputs) {
    if (is_device_or_stdout(o.path)) continue;
    o.path = tagged_path(o.path, tag);
    outputs.push_back(std::move(o));
  }
  // The profile holds in-use figures only: an allocation metric shows none.
  Metric m = config.metric == Metric::InuseObjects ? Metric::InuseObjects : Metric::InuseSpace;
  return write_outputs(recording, outputs, render_options(config, m));
}

}  // namespace allocscope
