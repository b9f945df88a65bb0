#include "runtime/go/sized.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/go/pclntab.h"

namespace allocscope {
namespace {

constexpr std::string_view kPrefix = "runtime.mallocgc";

}  // namespace

bool is_go_sized_allocator(std::string_view function) {
  if (!function.starts_with(kPrefix)) return false;
  size_t sc = function.rfind("SC");
  return sc != std::string_view::npos && sc > kPrefix.size() && sc + 2 < function.size() &&
         function.find_first_not_of("0123456789", sc + 2) == std::string_view::npos;
}

bool is_go_sized_slow_path(std::string_view function) {
  return function.starts_with(kPrefix) && function.ends_with("SlowPath") &&
         function.size() > kPrefix.size() + 8;
}

GoSizedAllocators go_sized_allocators(const GoPclntab& table) {
  GoSizedAllocators out;
  std::vector<std::pair<uint64_t, uint64_t>> code;
  for (std::string_view name : table.names_starting(kPrefix)) {
    bool allocator = is_go_sized_allocator(name);
    if (!allocator && !is_go_sized_slow_path(name)) continue;
    auto range = table.range(name);
    if (!range) continue;  // the last function of the text: none of these
    code.push_back(*range);
    if (allocator) out.entries.push_back(range->first);
  }
  if (out.entries.empty()) return GoSizedAllocators{};
  std::sort(out.entries.begin(), out.entries.end());
  std::sort(code.begin(), code.end());
  for (size_t i = 1; i < code.size(); ++i)
    if (code[i].first != code[i - 1].second) {
      out.not_one_run =
          "its allocators specialized by size (Go 1.27's runtime.mallocgc*SC*) are not one run of code: "
          "their frames cannot be told from the program's";
      return out;
    }
  out.start = code.front().first;
  out.end = code.back().second;
  return out;
}

}  // namespace allocscope
