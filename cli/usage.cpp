#include "usage.h"

#include <algorithm>
#include <regex>

#include "docs.h"

namespace allocscope {
namespace {

// Edits needed to turn `a` into `b` (Levenshtein), for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& v, const std::string& last) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? last : ", ") + v[i];
  return s;
}

// The subcommand the command line names, or "".
std::string subcommand_of(const std::vector<std::string>& args, const std::vector<std::string>& subcommands) {
  for (const std::string& a : args)
    if (std::find(subcommands.begin(), subcommands.end(), a) != subcommands.end()) return a;
  return "";
}

}  // namespace

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool positional) const {
  // "--no-hold{false}": how CLI11 spells a negated flag's value, not for users.
  return std::regex_replace(CLI::Formatter::make_option_name(opt, positional), std::regex(R"(\{[^}]*\})"),
                            "");
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (opt->get_type_size() == 0) return "";  // a flag: its description says what it does
  ValueKind kind = value_kind(*opt);
  std::string out = " " + (kind.choices.empty() ? kind.metavar : "{" + join(kind.choices, ",") + "}");
  std::string deflt = opt->get_default_str();
  if (kind.metavar == "BOOL") deflt = deflt == "1" ? "true" : deflt == "0" ? "false" : deflt;
  if (!deflt.empty()) out += "=" + deflt;
  if (opt->get_expected_max() > 1) out += " ...";
  return out;
}

std::string explain_parse_error(const std::string& what, const std::vector<std::string>& args,
                                const std::vector<std::string>& subcommands) {
  std::string sub = subcommand_of(args, subcommands);
  std::string help = "allocscope " + (sub.empty() ? "" : sub + " ") + "--help";
  std::smatch m;
  if (what == "A subcommand is required" || what.starts_with("A subcommand is required")) {
    std::string word = args.empty() ? "" : args.front();
    if (word.empty() || word.starts_with("-"))
      return "say what to do: allocscope " + join(subcommands, " or ") + " (allocscope --help)";
    std::string best;
    for (const std::string& s : subcommands)
      if (distance(word, s) <= 2 && (best.empty() || distance(word, s) < distance(word, best))) best = s;
    return "unknown command '" + word + "'" + (best.empty() ? "" : ": did you mean " + best + "?") +
           " (commands: " + join(subcommands, " and ") + ")";
  }
  if (std::regex_match(what, m, std::regex(R"(Could not convert: (\S+) = (.*))")))
    return m[1].str() + ": '" + m[2].str() + "' is not a number (" + help + ")";
  if (std::regex_match(what, m, std::regex(R"(The following arguments? (?:was|were) not expected: (.*))")))
    return "not an option of " + (sub.empty() ? std::string("allocscope") : sub) + ": " + m[1].str() + " (" +
           help + " lists them)";
  if (std::regex_match(what, m, std::regex(R"(\S+: File does not exist: (.*))")))
    return "no such file: " + m[1].str();
  if (std::regex_match(what, m, std::regex(R"((\S+) is required)")))
    return m[1].str() + " is required (" + help + ")";
  return what + " (" + help + ")";
}

}  // namespace allocscope
