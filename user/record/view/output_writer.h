// A recording's outputs: built from the profile, passed through the pprof
// encoding, and written (numbered with --interval).
#pragma once

#include <vector>

#include "base/result.h"
#include "model/profile.h"
#include "model/recording.h"
#include "record/record.h"
#include "record/view/recording_builder.h"
#include "symbols/symbolizer.h"

namespace allocscope {

// The recording as the saved pprof file holds it (estimates rounded), so
// that `allocscope report` on that file gives back the very same outputs.
Recording saved_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins);

// Every output `config` asks for, numbered `number` when it is not 0.
Result<void> write_record_outputs(const Recording& recording, const RecordConfig& config, unsigned number);
// An in-use profile (the peak, a --snapshot-above) beside every output
// written to a file, tagged: heap.pb.gz -> heap.peak.pb.gz. Standard output
// and devices (/dev/null) get none.
Result<void> write_tagged_outputs(const Recording& recording, const RecordConfig& config,
                                  const std::string& tag);

// Says on stderr which files the recording wrote (numbered `number`, the
// peak's beside them with `peak`, the timeline): a newcomer's first
// question is where the output went.
void print_written(const RecordConfig& config, unsigned number, bool peak);

}  // namespace allocscope
