// Rows of this process's own code for a walk in a unit test: its files'
// tables built as ProcessRows builds them, without a kernel to load them
// into, or the frame-pointer rule everywhere.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "host/proc_maps.h"
#include "symbols/stack_walk.h"
#include "symbols/symbolizer.h"
#include "symbols/unwind_table.h"

namespace allocscope {

class SelfRows : public RowLookup {
 public:
  explicit SelfRows(const std::vector<Mapping>& maps) : maps_(maps) {}
  bool frame_pointers_only = false;

  std::optional<as_unwind_row> row(uint64_t pc) override {
    const Mapping* m = find_mapping(maps_, pc);
    if (!m || !m->executable) return std::nullopt;
    if (frame_pointers_only || !m->is_file()) return as_frame_pointer_row();
    const as_unwind_row* r = find_row(table(*m), m->file_offset(pc));
    return r ? *r : as_unwind_row{0, 0, AS_ROW_NONE, 0};
  }

 private:
  const std::vector<as_unwind_row>& table(const Mapping& m) {
    auto [it, made] = tables_.try_emplace(m.inode);
    if (made) {
      auto t = build_unwind_table(m.path);
      EXPECT_TRUE(t.has_value()) << m.path;
      if (t) it->second = std::move(t->rows);
    }
    return it->second;
  }

  const std::vector<Mapping>& maps_;
  std::map<uint64_t, std::vector<as_unwind_row>> tables_;
};

// The functions holding `ips` in this process.
inline std::vector<std::string> function_names(const std::vector<uint64_t>& ips) {
  Symbolizer sym;
  std::vector<uint32_t> maps = sym.resolve(getpid(), ips);
  std::vector<std::string> out;
  for (size_t i = 0; i < ips.size(); ++i) out.push_back(sym.describe(maps[i], ips[i]).function);
  return out;
}

}  // namespace allocscope
