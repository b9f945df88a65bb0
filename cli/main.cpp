// allocscope's entry point: argv -> one validated config (options.h), then
// user/ does the work.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "options.h"
#include "record/record.h"
#include "usage.h"

using namespace allocscope;

// allocscope's own jemalloc (linked statically, see CMakeLists.txt) gives
// freed pages back within a second rather than ten: the agent builds a large
// profile for each scrape, and kept pages tripled its resident memory.
extern "C" {
const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}

namespace {

// Run as root through sudo, outputs are made for the user who asked: owned
// by SUDO_UID and SUDO_GID, so that they can read and remove them.
void outputs_for_sudo_user() {
  const char* uid = std::getenv("SUDO_UID");
  const char* gid = std::getenv("SUDO_GID");
  if (geteuid() != 0 || !uid || !gid) return;
  char *uid_end = nullptr, *gid_end = nullptr;
  unsigned long u = std::strtoul(uid, &uid_end, 10), g = std::strtoul(gid, &gid_end, 10);
  if (*uid && !*uid_end && *gid && !*gid_end && u != 0 && u < 0xffffffffUL && g < 0xffffffffUL)
    make_outputs_for(unsigned(u), unsigned(g));
}

// "allocscope help [COMMAND]" and "allocscope version", as git and most
// tools take them: --help and --version.
std::vector<std::string> with_words_as_options(std::vector<std::string> args) {
  if (args.empty()) return args;
  if (args[0] == "version") return {"--version"};
  if (args[0] == "help")
    return args.size() > 1 ? std::vector<std::string>{args[1], "--help"} : std::vector<std::string>{"--help"};
  return args;
}

int run(int argc, char** argv) {
  CommandLine cli;
  cli.app.name("allocscope");  // in usage lines, however it was run
  std::vector<std::string> args = with_words_as_options(std::vector<std::string>(argv + 1, argv + argc));
  if (std::string misused = misused_word(cli.app, args); !misused.empty()) {
    std::fprintf(stderr, "allocscope: %s\n", misused.c_str());
    return 2;
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // as CLI11 takes a vector
    cli.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.app.exit(e);  // --help, --version
    std::vector<std::string> subcommands;
    for (const CLI::App* sub : {cli.record, cli.report, cli.agent, cli.check})
      subcommands.push_back(sub->get_name());
    std::string message = dynamic_cast<const UsageError*>(&e)
                              ? std::string(e.what())
                              : explain_parse_error(e.what(), args, subcommands);
    std::fprintf(stderr, "allocscope: %s\n", message.c_str());
    return 2;  // usage errors: the conventional 2, whatever CLI11's kind
  }
  cli.finish();
  outputs_for_sudo_user();
  if (cli.record->parsed()) return record(cli.record_config);
  if (cli.report->parsed()) return report(cli.report_config);
  if (cli.agent->parsed()) return agent(cli.agent_config);
  if (cli.check->parsed()) return check(cli.check_config);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on stdout is an error to report (EPIPE), not a signal that
  // kills allocscope before its other outputs are written. (Launched
  // commands get SIGPIPE back before exec.)
  std::signal(SIGPIPE, SIG_IGN);
  // A recording answers Ctrl-C from its first moment (record() says what it
  // stopped), not only once its options are read.
  if (argc > 1 && std::string_view(argv[1]) == "record") hold_stop_signals_for_record();
  // Failures are Results all the way up; what still throws (out of memory, a
  // library's exception) ends here as one line, not as std::terminate's abort.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allocscope: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "allocscope: internal error: unknown exception\n");
  }
  return 1;
}
