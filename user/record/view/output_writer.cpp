#include "record/view/output_writer.h"

#include <sys/stat.h>

#include <cstdio>
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
  RenderOptions options = render_options(config, config.metric);
  auto written = write_outputs(recording, outputs, options);
  if (written) return written;
  // The recording is not lost with its path: saved whole (pprof, which
  // `allocscope report` turns into every other output) where it can be.
  auto pprof = render(recording, Format::Pprof, options);
  auto saved = pprof ? save_elsewhere(*pprof, ".pb.gz") : fail(pprof.error());
  Error e = written.error();
  e.message += saved ? "; the recording is saved in " + *saved + " instead (allocscope report " + *saved + ")"
                     : "; the recording could not be saved elsewhere either (" + saved.error().message + ")";
  return fail(e);
}

void make_outputs_for(unsigned uid, unsigned gid) { give_outputs_to(uid, gid); }

void print_written(const RecordConfig& config, unsigned number, bool peak) {
  std::string files;
  auto add = [&](const std::string& path) { files += (files.empty() ? "" : ", ") + path; };
  for (const OutputSpec& o : config.outputs) {
    if (o.path == "-") continue;
    add(number ? numbered_path(o.path, number) : o.path);
    if (peak && !is_device_or_stdout(o.path)) add(tagged_path(o.path, "peak"));
  }
  if (!config.timeline.empty()) add(config.timeline);
  if (files.empty()) return;
  std::string intervals =
      number > 1 ? " (interval " + std::to_string(number) + "; the earlier ones beside it)" : "";
  std::fprintf(stderr, "allocscope: wrote %s%s\n", files.c_str(), intervals.c_str());
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
