// Man pages (roff, man macros) and bash and zsh completions from CLI11's
// definition of the command line. Pure text: docs_main.cpp writes the files.
#include "docs.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace allocscope {

namespace {

using Options = std::vector<const CLI::Option*>;

// Options as --help lists them: hidden ones (group "") left out.
Options visible(const CLI::App& app, bool positional) {
  return app.get_options([positional](const CLI::Option* o) {
    return !o->get_group().empty() && o->get_positional() == positional;
  });
}

std::vector<const CLI::App*> subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

bool is_flag(const CLI::Option& o) { return o.get_type_size() == 0; }
bool repeatable(const CLI::Option& o) { return !is_flag(o) && o.get_expected_max() > 1; }

// "-p", "--pid", "--no-children": every spelling of an option.
std::vector<std::string> spellings(const CLI::Option& o) {
  std::vector<std::string> names;
  for (const std::string& s : o.get_snames()) names.push_back("-" + s);
  for (const std::string& l : o.get_lnames()) names.push_back("--" + l);
  return names;
}

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Text for roff: backslashes escaped, a minus at a word's start (an option)
// as \- so that it can be typed back, and no line read as a request.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\')
      out += "\\e";
    else if (c == '-' && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))
      out += "\\-";
    else
      out += c;
  }
  return out;
}

// An option's name: every '-' a minus, to be typed back as it is shown.
std::string roff_name(const std::string& name) {
  std::string out;
  for (char c : name) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

std::string sentence(std::string text) {
  if (!text.empty() && text.back() != '.') text += '.';
  return text;
}

std::string lowercase_first(std::string s) {
  if (!s.empty()) s[0] = char(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// ---- man pages ----

std::string man_header(const std::string& page, const std::string& summary, const std::string& version) {
  std::ostringstream out;
  out << ".TH " << roff(upper(page)) << " 1 \"\" \"" << roff(version) << "\" \"User Commands\"\n"
      << ".SH NAME\n"
      << roff(page) << " \\- " << roff(lowercase_first(summary)) << "\n";
  return out.str();
}

std::string man_option(const CLI::Option& o) {
  std::ostringstream out;
  out << ".TP\n";
  std::vector<std::string> names;
  for (const std::string& n : spellings(o)) names.push_back("\\fB" + roff_name(n) + "\\fR");
  out << join(names, ", ");
  ValueKind kind = value_kind(o);
  if (!kind.metavar.empty()) out << " \\fI" << roff(kind.metavar) << "\\fR";
  out << "\n" << roff(sentence(o.get_description()));
  if (!kind.choices.empty()) out << " One of: " << roff(join(kind.choices, ", ")) << ".";
  std::string deflt = o.get_default_str();
  if (!deflt.empty() && !is_flag(o)) out << " Default: " << roff(deflt) << ".";
  if (repeatable(o) && o.get_description().find("repeat") == std::string::npos) out << " May be repeated.";
  out << "\n";
  return out.str();
}

std::string man_positional(const CLI::Option& o) {
  std::string name = upper(o.get_name(true));
  return ".TP\n\\fI" + roff(name) + "\\fR\n" + roff(sentence(o.get_description())) + "\n";
}

// The footer (--help's epilogue): a line at column 0 heads a block, the
// indented lines under it are shown as they are. "Examples:" becomes
// EXAMPLES; another heading names its section by its first word.
std::string man_footer(const std::string& footer) {
  struct Block {
    std::string heading;
    std::vector<std::string> lines;
  };
  std::vector<Block> blocks;
  std::istringstream in(footer);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    bool indented = line[0] == ' ';
    if (!indented && (blocks.empty() || !blocks.back().lines.empty())) blocks.push_back({});
    if (blocks.empty()) blocks.push_back({});
    if (indented)
      blocks.back().lines.push_back(line.substr(std::min(line.find_first_not_of(' '), size_t(2))));
    else
      blocks.back().heading += (blocks.back().heading.empty() ? "" : " ") + line;
  }
  std::ostringstream out;
  for (const Block& b : blocks) {
    std::string first = b.heading.substr(0, b.heading.find_first_of(" :("));
    out << ".SH " << roff(upper(first.empty() ? "NOTES" : first)) << "\n";
    if (b.heading != first + ":") out << roff(b.heading) << "\n";
    out << ".PP\n.nf\n";
    for (const std::string& l : b.lines) out << roff(l) << "\n";
    out << ".fi\n";
  }
  return out.str();
}

std::string man_synopsis(const CLI::App& sub) {
  std::string s = "\\fBallocscope " + roff(sub.get_name()) + "\\fR [\\fIOPTIONS\\fR]";
  for (const CLI::Option* p : visible(sub, true)) {
    std::string name = "\\fI" + roff(upper(p->get_name(true))) + "\\fR";
    // A command to launch follows "--"; files are simply listed.
    if (!repeatable(*p))
      s += " " + name;
    else
      s += value_kind(*p).metavar == "COMMAND" ? " [\\fB\\-\\-\\fR " + name + " ...]" : " " + name + " ...";
  }
  return s;
}

std::string see_also(const CLI::App& app, const std::string& except) {
  std::vector<std::string> refs;
  if (except != "allocscope") refs.push_back(".BR allocscope (1)");
  for (const CLI::App* sub : subcommands(app))
    if ("allocscope-" + sub->get_name() != except)
      refs.push_back(".BR allocscope\\-" + sub->get_name() + " (1)");
  for (size_t i = 0; i + 1 < refs.size(); ++i) refs[i] += " ,";
  return ".SH SEE ALSO\n" + join(refs, "\n") + "\n";
}

std::string subcommand_page(const CLI::App& app, const CLI::App& sub, const std::string& version) {
  std::string page = "allocscope-" + sub.get_name();
  std::ostringstream out;
  out << man_header(page, sub.get_description(), version) << ".SH SYNOPSIS\n"
      << man_synopsis(sub) << "\n"
      << ".SH DESCRIPTION\n"
      << roff(sentence(sub.get_description())) << " The options below are those of \\fBallocscope "
      << roff(sub.get_name()) << " \\-\\-help\\fR.\n";
  Options positionals = visible(sub, true);
  if (!positionals.empty()) {
    out << ".SH ARGUMENTS\n";
    for (const CLI::Option* p : positionals) out << man_positional(*p);
  }
  out << ".SH OPTIONS\n";
  for (const CLI::Option* o : visible(sub, false)) out << man_option(*o);
  out << man_footer(sub.get_footer()) << see_also(app, page);
  return out.str();
}

std::string main_page(const CLI::App& app, const std::string& version) {
  std::ostringstream out;
  out << man_header("allocscope", "eBPF heap allocation sampler for Linux", version)
      << ".SH SYNOPSIS\n\\fBallocscope\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.br\n"
      << "\\fBallocscope\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR\n.br\n\\fBallocscope \\-\\-version\\fR\n"
      << ".SH DESCRIPTION\n"
         "allocscope samples the heap allocations of running processes, of a command it launches, or of "
         "every process on the machine, through uprobes on the allocators' entry points: no relinking, "
         "no restart. A sample is taken about every \\fIRATE\\fR bytes allocated, with the allocating "
         "stack; the frees of sampled blocks are followed too. Every figure is an unbiased estimate of "
         "the bytes and objects allocated, and of those still live, with its confidence interval.\n"
         ".PP\nOutputs are pprof profiles, folded stacks, SVG flame graphs, top tables and JSON.\n"
      << ".SH COMMANDS\n";
  for (const CLI::App* sub : subcommands(app))
    out << ".TP\n\\fB" << roff(sub->get_name()) << "\\fR\n"
        << roff(sentence(sub->get_description())) << " See \\fBallocscope\\-" << roff(sub->get_name())
        << "\\fR(1).\n";
  out << ".SH OPTIONS\n";
  for (const CLI::Option* o : visible(app, false)) out << man_option(*o);
  out << ".SH EXIT STATUS\n"
         "\\fBrecord \\-\\- \\fICOMMAND\\fR exits with the command's status (128 + N if a signal N "
         "killed it). Otherwise allocscope exits with 0 on success, 1 after an error and 2 for "
         "invalid options.\n"
         ".SH PRIVILEGES\n"
         "Recording needs root, or the capabilities CAP_BPF and CAP_PERFMON (and CAP_SYS_PTRACE for "
         "other users' processes). \\fBreport\\fR needs none.\n"
         ".SH FILES\n"
         ".TP\n/lib/systemd/system/allocscope\\-agent.service\n"
         "The agent as a systemd service (not enabled on installation).\n"
         ".TP\n/usr/share/doc/allocscope/\n"
         "The README (install, the two commands, examples), docs/ by topic (recording, outputs, report, "
         "kernels, containers, Python, the agent, estimates, troubleshooting) and BENCHMARKS.md.\n"
      << see_also(app, "allocscope");
  return out.str();
}

// ---- completions ----

// Shell words for a single-quoted string.
std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string value_action_bash(const ValueKind& kind) {
  if (!kind.choices.empty())
    return "COMPREPLY=($(compgen -W " + single_quoted(join(kind.choices, " ")) + " -- \"$cur\"))";
  if (kind.metavar == "FILE") return "COMPREPLY=($(compgen -f -- \"$cur\"))";
  if (kind.metavar == "PID") return "COMPREPLY=($(compgen -W \"$(_allocscope_pids)\" -- \"$cur\"))";
  if (kind.metavar == "COMMAND") return "COMPREPLY=($(compgen -c -- \"$cur\"))";
  return "COMPREPLY=()";  // a number, a size, a time: nothing to offer
}

std::string bash_subcommand(const CLI::App& sub) {
  std::vector<std::string> words;
  std::ostringstream values;
  for (const CLI::Option* o : visible(sub, false)) {
    std::vector<std::string> names = spellings(*o);
    words.insert(words.end(), names.begin(), names.end());
    if (is_flag(*o)) continue;
    values << "        " << join(names, "|") << ") " << value_action_bash(value_kind(*o)) << "; return ;;\n";
  }
  std::ostringstream out;
  out << "    " << sub.get_name() << ")\n"
      << "      case $prev in\n"
      << values.str() << "      esac\n"
      << "      opts=" << single_quoted(join(words, " ")) << " ;;\n";
  return out.str();
}

// zsh's _arguments: "--opt[description]:metavar:action"; the description is
// --help's first clause, with the characters _arguments reads escaped.
std::string zsh_description(const std::string& text) {
  std::string d = text.substr(0, text.find_first_of(";:(\n"));
  while (!d.empty() && (d.back() == ' ' || d.back() == ',')) d.pop_back();
  std::string out;
  for (char c : d) {
    if (c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string zsh_action(const ValueKind& kind) {
  if (!kind.choices.empty()) return "(" + join(kind.choices, " ") + ")";
  if (kind.metavar == "FILE") return "_files";
  if (kind.metavar == "PID") return "_pids";
  return " ";  // a value to type: the message alone
}

std::string zsh_option(const CLI::Option& o) {
  std::vector<std::string> names = spellings(o);
  std::string spec;
  if (repeatable(o))
    spec = "*";
  else if (names.size() > 1)
    spec = "(" + join(names, " ") + ")";
  std::string tail = "[" + zsh_description(o.get_description()) + "]";
  ValueKind kind = value_kind(o);
  if (!kind.metavar.empty()) tail += ":" + upper(kind.metavar) + ":" + zsh_action(kind);
  std::string out;
  // {-p,--pid}'[...]' expands to one spec per spelling, each with the exclusions.
  if (names.size() > 1)
    out = single_quoted(spec) + "{" + join(names, ",") + "}" + single_quoted(tail);
  else
    out = single_quoted(spec + names[0] + tail);
  return out;
}

}  // namespace

ValueKind value_kind(const CLI::Option& option) {
  ValueKind kind;
  if (is_flag(option)) return kind;
  std::string type = option.get_type_name();
  kind.metavar = type.substr(0, type.find(':'));
  size_t open = type.find('{'), close = type.find('}', open);
  if (open != std::string::npos && close != std::string::npos) {
    std::istringstream set(type.substr(open + 1, close - open - 1));
    for (std::string choice; std::getline(set, choice, ',');) kind.choices.push_back(choice);
  }
  return kind;
}

std::vector<GeneratedFile> man_pages(const CLI::App& app, const std::string& version) {
  std::vector<GeneratedFile> pages{{"allocscope.1", main_page(app, version)}};
  for (const CLI::App* sub : subcommands(app))
    pages.push_back({"allocscope-" + sub->get_name() + ".1", subcommand_page(app, *sub, version)});
  return pages;
}

std::string bash_completion(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : subcommands(app)) names.push_back(sub->get_name());
  std::vector<std::string> top = names;
  for (const CLI::Option* o : visible(app, false))
    for (const std::string& s : spellings(*o)) top.push_back(s);
  std::ostringstream out;
  out << "# bash completion for allocscope, generated from its option definitions (allocscope_docs).\n"
      << "_allocscope_pids() { (cd /proc && printf '%s\\n' [0-9]*); }\n\n"
      << "_allocscope() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd='' opts i\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    case ${COMP_WORDS[i]} in\n"
      << "      --)  # the launched command, then its own arguments\n"
      << "        if ((i == COMP_CWORD - 1)); then COMPREPLY=($(compgen -c -- \"$cur\"));\n"
      << "        else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n"
      << "        return ;;\n"
      << "      " << join(names, "|") << ") [[ -z $cmd ]] && cmd=${COMP_WORDS[i]} ;;\n"
      << "    esac\n"
      << "  done\n"
      << "  case $cmd in\n"
      << "    '') COMPREPLY=($(compgen -W " << single_quoted(join(top, " ")) << " -- \"$cur\")); return ;;\n";
  for (const CLI::App* sub : subcommands(app)) out << bash_subcommand(*sub);
  out << "  esac\n"
      << "  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"));\n"
      << "  else COMPREPLY=($(compgen -f -- \"$cur\")); fi\n"
      << "}\n"
      << "complete -o filenames -F _allocscope allocscope\n";
  return out.str();
}

std::string zsh_completion(const CLI::App& app) {
  std::ostringstream out;
  out << "#compdef allocscope\n"
      << "# zsh completion for allocscope, generated from its option definitions (allocscope_docs).\n\n"
      << "_allocscope() {\n"
      << "  local -a commands=(\n";
  for (const CLI::App* sub : subcommands(app))
    out << "    " << single_quoted(sub->get_name() + ":" + zsh_description(sub->get_description())) << "\n";
  out << "  )\n"
      << "  if (( CURRENT == 2 )); then\n"
      << "    _describe -t commands 'allocscope command' commands\n"
      << "    return\n"
      << "  fi\n"
      << "  local cmd=$words[2]\n"
      << "  shift words\n"
      << "  (( CURRENT-- ))\n"
      << "  case $cmd in\n";
  for (const CLI::App* sub : subcommands(app)) {
    out << "    " << sub->get_name() << ")\n      _arguments -s -S";
    for (const CLI::Option* o : visible(*sub, false)) out << " \\\n        " << zsh_option(*o);
    for (const CLI::Option* p : visible(*sub, true))
      out << " \\\n        "
          << single_quoted(!repeatable(*p) ? ":" + p->get_name(true) + ":" + zsh_action(value_kind(*p))
                           : value_kind(*p).metavar == "COMMAND"
                               ? "*::" + p->get_name(true) + ":_normal"
                               : "*:" + p->get_name(true) + ":" + zsh_action(value_kind(*p)));
    out << " ;;\n";
  }
  out << "  esac\n"
      << "}\n\n"
      << "_allocscope \"$@\"\n";
  return out.str();
}

}  // namespace allocscope
