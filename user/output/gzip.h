// gzip streams (windowBits 15 + 16: the wrapper pprof writes and expects),
// through zlib.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace allocscope {

Result<std::string> gzip(std::string_view raw);

// Inflates a whole stream; a truncated or corrupt one, or one that inflates
// past max_bytes, is an error ("gzip: truncated"). zlib directly rather than
// protobuf's GzipInputStream, which reports a truncated stream as a clean end
// of data: a cut file would then decode as a smaller profile.
Result<std::string> gunzip(std::string_view gz, size_t max_bytes);

}  // namespace allocscope
