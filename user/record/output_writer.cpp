#include "record/output_writer.h"

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

Result<void> write_record_outputs(const Recording& recording, const RecordConfig& config, unsigned number) {
  std::vector<OutputSpec> outputs = config.outputs;
  if (number)
    for (OutputSpec& o : outputs) o.path = numbered_path(o.path, number);
  RenderOptions o = config.render;
  o.metric = config.metric;
  o.tool = std::string("allocscope ") + ALLOCSCOPE_VERSION_STRING;
  return write_outputs(recording, outputs, o);
}

}  // namespace allocscope
