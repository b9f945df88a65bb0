// The command line's one definition: every subcommand, option, help text and
// check. --help, the man pages and the shell completions are all read from
// it, so none of them can drift from what allocscope accepts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "check/check.h"
#include "record/record.h"
#include "report/report.h"

namespace allocscope {

// Options kept as text by CLI11 and converted once parsing succeeded.
struct OptionText {
  std::string rate = "512KiB", duration, metric = "alloc_space", ringbuf = "16MiB", probe_mode = "auto";
  std::string snapshot_above;
  std::string format, interval, by = "function", sort = "value", unwind = "dwarf", duty, output_mode;
  std::string retention, top_every;
  std::vector<std::string> outputs;
  bool children = false, top = false;
  CLI::Option* children_flag = nullptr;  // given at all? (the default depends on -- CMD)
  CLI::Option* max_live_opt = nullptr;   // given at all? (the default depends on the rate)
};

// "allocscope 0.1.0 (git 1a2b3c4)": --version's line, the man pages' footer.
std::string version_line();

// The parser and the configs it fills. Options point into the configs, so a
// CommandLine stays where it was made.
struct CommandLine {
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // After a successful parse: the parsed subcommand's text options into its config.
  void finish();

  CLI::App app;
  RecordConfig record_config;
  ReportConfig report_config;
  AgentConfig agent_config;
  CheckConfig check_config;
  OptionText record_text, report_text, agent_text;
  CLI::App* record = nullptr;
  CLI::App* report = nullptr;
  CLI::App* agent = nullptr;
  CLI::App* check = nullptr;
};

// The check subcommand (check_options.cpp).
CLI::App* add_check(CLI::App& app, CheckConfig& c);

// --force-fallback, which record, agent and check share.
void add_force_fallback(CLI::App* app, std::string& list);

// record's choice of how its processes are sampled (path_options.cpp): the
// options the callback checks against the others.
struct PathOptions {
  CLI::Option* preload = nullptr;
  CLI::Option* no_bpf = nullptr;
};
PathOptions add_path_options(CLI::App* rec, RecordConfig& c);

// Options record and agent share (sampling_options.cpp): what is sampled,
// how, and the capacities; and their text into the config.
void add_sampling_options(CLI::App* app, RecordConfig& c, OptionText& t);
void finish_sampling(RecordConfig& c, const OptionText& t);

// CLI11 validator built on one of our parsers.
template <typename Parse>
CLI::Validator parsed_by(Parse parse, std::string what) {
  return CLI::Validator(
      [parse, what](std::string& value) -> std::string {
        if (parse(value)) return std::string();
        // "duration (30, 30s)" -> "invalid duration 'abc' (30, 30s)"
        size_t forms = what.find(" (");
        return "invalid " + what.substr(0, forms) + " '" + value + "'" +
               (forms == std::string::npos ? "" : what.substr(forms));
      },
      "");
}

}  // namespace allocscope
