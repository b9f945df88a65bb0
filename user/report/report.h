// `allocscope report`: a saved recording (pprof file) turned into any output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "output/outputs.h"
#include "output/render.h"

namespace allocscope {

struct ReportConfig {
  std::vector<std::string> inputs;  // pprof files (gzip or raw): one, or --leaks' series
  std::string diff_base;            // --diff BASE: inputs[0] is the new profile
  bool leaks = false;               // --leaks: inputs are interval profiles of one recording
  std::string timeline;             // --timeline FILE.html: inputs are a series, charted
  std::vector<OutputSpec> outputs;  // default: the top table on stdout
  RenderOptions render;
  std::optional<Metric> metric;  // default: the file's default sample type
  std::optional<uint32_t> pid;
  std::string comm, focus, ignore;  // regular expressions, "" = none
};

// Returns the exit status (0, or 1 after an error already printed).
int report(const ReportConfig& config);

}  // namespace allocscope
