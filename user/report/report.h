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
  std::string input;                // pprof file (gzip or raw)
  std::string diff_base;            // --diff BASE: input is the new profile
  std::vector<OutputSpec> outputs;  // default: the top table on stdout
  RenderOptions render;
  std::optional<Metric> metric;  // default: the file's default sample type
  std::optional<uint32_t> pid;
  std::string comm, focus, ignore;  // regular expressions, "" = none
};

// Returns the exit status (0, or 1 after an error already printed).
int report(const ReportConfig& config);

}  // namespace allocscope
