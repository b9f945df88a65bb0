// Regular expressions given by users (--comm, --focus, --ignore), in POSIX
// extended syntax, matched anywhere in a text. RE2 underneath: linear time
// and no recursion, so a 60 KB frame name from a crafted profile neither
// overflows the stack (libstdc++'s std::regex recurses once per character)
// nor takes time quadratic in its length.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace re2 {
class RE2;
}

namespace allocscope {

class Pattern {
 public:
  // The expression compiled, or why it is not one ("invalid regular
  // expression: ...").
  static Result<Pattern> compile(const std::string& expression);
  // Whether the expression matches somewhere in `text`.
  bool found_in(std::string_view text) const;

 private:
  explicit Pattern(std::shared_ptr<const re2::RE2> re) : re_(std::move(re)) {}
  std::shared_ptr<const re2::RE2> re_;  // shared: patterns are copied into filters
};

}  // namespace allocscope
