// What --help and a usage error say: option values as METAVAR=default (or
// {choices}=default), flags bare, without CLI11's type and range noise
// (N:UINT in [1 - 100000], {false}, BOOL=1); a parse error as one line that
// starts with "allocscope:" and says what to do.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace allocscope {

class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool positional) const override;
  std::string make_option_opts(const CLI::Option* opt) const override;
};

// A usage error of ours (one CLI11 prints as it is given).
struct UsageError : CLI::ParseError {
  explicit UsageError(std::string message)
      : CLI::ParseError("UsageError", std::move(message), CLI::ExitCodes::ValidationError) {}
};

// The one line to print for a parse error: `what` is CLI11's message,
// `args` the command line (less the program name), `subcommands` the names
// of the subcommands. Without the "allocscope: " prefix.
std::string explain_parse_error(const std::string& what, const std::vector<std::string>& args,
                                const std::vector<std::string>& subcommands);

// Before parsing: a word of the command line that CLI11 would read wrongly
// (an unknown option taken as the command or a FILE, a value given to a
// flag, a word before -- that no option takes), as the one line to print
// without the "allocscope: " prefix; "" when there is none. `args` is the
// command line less the program name.
std::string misused_word(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace allocscope
