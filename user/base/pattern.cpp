#include "base/pattern.h"

#include <re2/re2.h>

namespace allocscope {

Result<Pattern> Pattern::compile(const std::string& expression) {
  RE2::Options options;
  options.set_posix_syntax(true);  // extended POSIX syntax, as grep -E reads it
  options.set_log_errors(false);   // the error is returned, not printed
  options.set_never_capture(true);
  auto re = std::make_shared<const re2::RE2>(expression, options);
  if (!re->ok()) return fail("invalid regular expression: " + re->error());
  return Pattern(std::move(re));
}

bool Pattern::found_in(std::string_view text) const { return RE2::PartialMatch(text, *re_); }

}  // namespace allocscope
