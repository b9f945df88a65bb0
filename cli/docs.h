// Man pages and shell completions, written from the command line's own
// definition (options.h): what --help shows, they show.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace allocscope {

struct GeneratedFile {
  std::string name;  // "allocscope-record.1", "allocscope.bash", "_allocscope"
  std::string text;
};

// allocscope(1) and one page per subcommand, allocscope-NAME(1), in roff
// (man macros). `version` goes in each page's footer.
std::vector<GeneratedFile> man_pages(const CLI::App& app, const std::string& version);

// A bash completion script (the function _allocscope, bound by `complete`).
std::string bash_completion(const CLI::App& app);

// A zsh completion function (#compdef allocscope).
std::string zsh_completion(const CLI::App& app);

// What an option's value is, from the name given to it in options.cpp
// (type_name) and its checks: it decides what the completions offer.
struct ValueKind {
  std::string metavar;               // "SIZE", "FILE", "MODE"; empty for a flag
  std::vector<std::string> choices;  // IsMember's set, if any
};
ValueKind value_kind(const CLI::Option& option);

}  // namespace allocscope
