// A Recording as a pprof profile (github.com/google/pprof proto/profile.proto,
// gzip-compressed), the format `go tool pprof`, Pyroscope and speedscope read,
// and the file `allocscope report` reads back.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "model/recording.h"

namespace allocscope {

// Sample types, in this order: alloc_objects/count, alloc_space/bytes,
// inuse_objects/count, inuse_space/bytes (a Go heap profile's, so tools that
// know those read ours), then samples/count and live_samples/count (the raw
// sample counts, which pprof shows as two more indexes). Values are the
// unbiased estimates rounded to the nearest integer; the period is the rate.
// Comments: `tool` (e.g. "allocscope 0.1.0"), "rate=R" and, when samples
// were lost, one warning; labels: pid, comm (and ns_pid). The counters,
// paths and per-sample figures for intervals travel apart
// (pprof_sidecar.h). Files of earlier versions, which had them in comments
// ("name=value", "path name=value") and "as.*" labels, read the same.
constexpr std::string_view kPathComment = "path ";
Result<std::string> encode_pprof(const Recording& r, std::string_view tool = "allocscope");

// Reads gzip-compressed or raw profile.proto bytes. Sample types are found by
// name, so other orders decode too; a missing samples or live_samples type
// reads as 0, and at least one of the four heap types must be present.
// Decoding what encode_pprof wrote gives back the Recording with its totals
// rounded. Malformed input is an error ("not a pprof profile: ...").
Result<Recording> decode_pprof(std::string_view data);

}  // namespace allocscope
