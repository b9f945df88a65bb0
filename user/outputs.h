// Output files: written whole or not at all.
#pragma once

#include <string>
#include <string_view>

#include "render.h"
#include "result.h"

namespace allocscope {

struct OutputSpec {
  std::string path;  // "-" is stdout
  Format format = Format::Folded;
};

// Writes to a temporary file beside `path` and renames it into place, so a
// reader never sees a partial file and a failure leaves none.
Result<void> write_file_atomically(const std::string& path, std::string_view content);

// "heap.pb.gz", 3 -> "heap.3.pb.gz": numbered outputs of --interval.
std::string numbered_path(const std::string& path, unsigned n);

// Renders and writes every output; stops at the first failure.
Result<void> write_outputs(const Recording& r, const std::vector<OutputSpec>& outputs, const RenderOptions& o);

}  // namespace allocscope
