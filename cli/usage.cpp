#include "usage.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
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

bool is_flag(const CLI::Option* opt) { return opt->get_expected_max() == 0; }

// The subcommand's option names nearest `name` ("--durration": --duration),
// or "".
std::string nearest_option(const CLI::App& sub, const std::string& name) {
  std::string best;
  size_t best_distance = 3;  // two edits at most: a typo, not another word
  for (const CLI::Option* opt : sub.get_options()) {
    for (const std::string& l : opt->get_lnames()) {
      size_t d = distance(name, "--" + l);
      if (d < best_distance) best = "--" + l, best_distance = d;
    }
  }
  return best;
}

// The other subcommand that has option `name`, or "".
std::string owner_of(const CLI::App& app, const CLI::App& sub, const std::string& name) {
  for (const CLI::App* other : app.get_subcommands([](const CLI::App*) { return true; }))
    if (other != &sub && other->get_option_no_throw(name)) return other->get_name();
  return "";
}

std::string unknown_option(const CLI::App& app, const CLI::App& sub, const std::string& name) {
  std::string line = "not an option of " + sub.get_name() + ": " + name;
  std::string near = nearest_option(sub, name), owner = owner_of(app, sub, name);
  if (!near.empty())
    line += "; did you mean " + near + "?";
  else if (!owner.empty())
    line += " (an option of " + owner + ")";
  return line + " (allocscope " + sub.get_name() + " --help lists them)";
}

// "5", "0.5", "10s", "1MiB": a number, with a unit at most.
bool looks_like_a_value(const std::string& w) {
  static const std::regex value("[0-9][0-9.]*[A-Za-z]{0,3}");
  return std::regex_match(w, value);
}

// "-5", "-0.5": a value, not an option.
bool looks_numeric(const std::string& w) {
  return w.size() > 1 && (std::isdigit(static_cast<unsigned char>(w[1])) || w[1] == '.');
}

}  // namespace

std::string misused_word(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* sub = nullptr;
  size_t i = 0;
  for (; i < args.size() && !sub; ++i)
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (args[i] == s->get_name()) sub = s;
  if (!sub) return "";
  bool has_dashes = std::find(args.begin() + long(i), args.end(), "--") != args.end();
  const CLI::Option* last_flag = nullptr;  // the word before, when a flag
  for (; i < args.size() && args[i] != "--"; ++i) {
    const std::string& w = args[i];
    if (w.size() < 2 || w[0] != '-' || looks_numeric(w)) {
      // A word no option takes: with -- given, record's command is after it.
      if (has_dashes && sub->get_option_no_throw("command")) {
        std::string why = last_flag ? last_flag->get_name() + " takes no value, and " : "";
        return why + "'" + w + "' is not an option of " + sub->get_name() +
               " (the command goes after --: allocscope " + sub->get_name() + " --help)";
      }
      // A flag's value taken for a file ("--json 5"): the flag is the
      // mistake. A missing file of a file's look is the file's.
      std::error_code error;
      if (last_flag && sub->get_option_no_throw("file") && looks_like_a_value(w) &&
          !std::filesystem::exists(w, error))
        return last_flag->get_name() + " takes no value, and there is no file '" + w + "' (allocscope " +
               sub->get_name() + " --help)";
      last_flag = nullptr;
      continue;
    }
    bool is_long = w.starts_with("--");
    size_t eq = w.find('=');
    std::string name = is_long ? w.substr(0, eq) : w.substr(0, 2);
    const CLI::Option* opt = sub->get_option_no_throw(name);
    if (!opt && name != "--help" && name != "-h") return unknown_option(app, *sub, name);
    last_flag = nullptr;
    if (!opt) continue;
    if (is_flag(opt)) {
      if ((is_long && eq != std::string::npos) || (!is_long && w.size() > 2 && w[2] == '='))
        return name + " takes no value: " + w + " (allocscope " + sub->get_name() + " --help)";
      last_flag = opt;
    } else if ((is_long && eq == std::string::npos) || (!is_long && w.size() == 2)) {
      ++i;  // its value, whatever it looks like ("-o -")
    }
  }
  return "";
}

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
