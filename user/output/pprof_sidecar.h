// What allocscope keeps in its pprof files beyond what pprof shows: the
// recording's counters and kernel paths, and each sample's interval
// accumulators and lifetime histograms (sample_labels.h). They travel in
// one entry of the string table that nothing in the profile refers to:
// `go tool pprof` and other readers never show it (its comments and labels
// stay those a pprof user reads), and `allocscope report` rebuilds the
// recording from it. A tool that rewrites the profile drops it; report
// then shows estimates without intervals.
#pragma once

#include <string>
#include <string_view>

#include "model/recording.h"

namespace allocscope {

// The entry's first line.
constexpr std::string_view kSidecarMagic = "allocscope-sidecar-v1\n";

// The entry for `r`: the magic, then "c NAME VALUE" per counter, "p NAME
// VALUE" per path (VALUE to the end of the line), "s INDEX KEY=NUM..." per
// sample with figures beyond pprof's values.
std::string encode_sidecar(const Recording& r);

// Applies an entry to `r` (decoded from the same file, its samples in the
// file's order). Lines it does not know, or that name a sample it does not
// have, are skipped: false when any was.
bool apply_sidecar(std::string_view entry, Recording& r);

}  // namespace allocscope
