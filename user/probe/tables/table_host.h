// Where TableLoader puts the unwind tables it builds: the kernel's maps
// when BPF walks the stacks (BpfSession), or nowhere but TableLoader's own
// copy when every walk is done in userspace (a recording without BPF).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "base/result.h"

namespace allocscope {

class TableHost {
 public:
  virtual ~TableHost() = default;
  // Takes the table of the file the walks name `key` (replacing one it had)
  // and clears any request for it.
  virtual Result<void> load_unwind_table(const as_file_key& key, std::span<const as_unwind_row> rows) = 0;
  // Process `pid`'s executable file mappings as the walks name their files;
  // nullopt when they cannot be listed.
  virtual std::optional<std::vector<as_vma>> code_mappings(pid_t pid) const = 0;
  // Forgets a request for a table (the next walk that needs it asks again).
  virtual void forget_table_request(const as_file_key& key) = 0;
  // Ends the reader's wait at once (a build finished); from any thread.
  virtual void wake() = 0;
};

// The host of a recording without BPF: no kernel holds tables or asks for
// them, and /proc names the files the walks meet.
class UserspaceTableHost final : public TableHost {
 public:
  explicit UserspaceTableHost(std::function<void()> wake = {}) : wake_(std::move(wake)) {}
  Result<void> load_unwind_table(const as_file_key&, std::span<const as_unwind_row>) override { return {}; }
  std::optional<std::vector<as_vma>> code_mappings(pid_t) const override { return std::nullopt; }
  void forget_table_request(const as_file_key&) override {}
  void wake() override {
    if (wake_) wake_();
  }

 private:
  std::function<void()> wake_;
};

}  // namespace allocscope
