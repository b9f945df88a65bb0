// Output files: written whole or not at all.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "output/render.h"

namespace allocscope {

struct OutputSpec {
  std::string path;  // "-" is stdout
  Format format = Format::Folded;
  std::optional<unsigned> mode;  // --output-mode: the file's permissions, exactly
  bool format_chosen = false;    // by --format, not by the path's suffix
};

// Writes to a new file beside `path` (mkostemp: created exclusively, so no
// planted file or symlink is ever opened; 0600 as root), fsyncs it and
// renames it into place, so a reader never sees a partial file and a failure
// leaves none. "-" is standard output, whose errors (a full disk, a closed
// pipe) are errors too. `mode`, when given, is the file's permissions
// (umask aside), whoever runs allocscope. A character device or a FIFO
// (/dev/null) is written in place instead. A symbolic link of root's or the
// caller's (/dev/stdout) is followed; anyone else's is replaced.
Result<void> write_file_atomically(const std::string& path, std::string_view content,
                                   std::optional<unsigned> mode = std::nullopt);

// Whether `path` can be written as write_file_atomically writes it, tried
// before a recording starts: a file made and removed beside it (or, for a
// device or a FIFO, nothing). Fails saying why: a directory, a missing or
// read-only directory, a file system that takes no files (/sys, /proc).
Result<void> check_output(const std::string& path);

// Files written from now on are given to this user and group (a root run
// under sudo makes its outputs for the user who asked: SUDO_UID).
void give_outputs_to(unsigned uid, unsigned gid);

// "PATH is written as folded stacks (...)" for an output whose suffix names
// no format, when no --format chose one; "" for any other (stdout and
// devices take what they are given).
std::string unnamed_format_note(const OutputSpec& o);

// The earlier output at `path`, a regular file of the caller's (or of the
// user outputs are given to), renamed to `path`.old, over any older one
// (renamed, never followed: a link there is replaced, not written
// through); whether there was one. For a default output path, which a
// second run would otherwise overwrite unasked.
bool set_aside_previous(const std::string& path);
// Undoes set_aside_previous when nothing was written in its place.
void put_back_previous(const std::string& path);

// `content` saved where it can be when its own path failed: a new file
// (created exclusively, never one planted) named allocscope-XXXXXX`suffix`
// in the current directory, else in $TMPDIR or /tmp. Its path.
Result<std::string> save_elsewhere(std::string_view content, const std::string& suffix);

// "heap.pb.gz", 3 -> "heap.3.pb.gz": numbered outputs of --interval.
std::string numbered_path(const std::string& path, unsigned n);
// "heap.pb.gz", "peak" -> "heap.peak.pb.gz": an output's companions.
std::string tagged_path(const std::string& path, const std::string& tag);

// Renders and writes every output, each whatever became of the others; the
// error names all that failed.
Result<void> write_outputs(const Recording& r, const std::vector<OutputSpec>& outputs,
                           const RenderOptions& o);
// The same for what another renderer makes of each format (report --diff's,
// --leaks').
Result<void> write_outputs(const std::vector<OutputSpec>& outputs,
                           const std::function<Result<std::string>(Format)>& render_as);

}  // namespace allocscope
