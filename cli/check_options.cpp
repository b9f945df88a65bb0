// `allocscope check`'s command line.
#include "options.h"

namespace allocscope {

CLI::App* add_check(CLI::App& app, CheckConfig& c) {
  auto* check = app.add_subcommand(
      "check", "Tell whether allocscope can record on this machine: kernel features, privileges, programs");
  check->footer(
      "Probes the running kernel for each feature allocscope uses (by loading tiny programs and attaching\n"
      "them to allocscope's own functions, never by version), shows what allocscope does where one is\n"
      "missing, then loads and verifies the real programs in each configuration record and agent use.\n"
      "Exit status 0 only when record and agent can run here.\n"
      "Examples:\n"
      "  sudo allocscope check      the report\n"
      "  sudo allocscope check -v   also why each missing feature was judged missing, and the kernel\n"
      "                             verifier's log of any program it refused\n"
      "  sudo allocscope check --json | jq .features   for an inventory of many machines");
  check->add_flag(
      "-v,--verbose", c.verbose,
      "Also print why each feature was judged missing and the verifier's log of a refused program");
  check->add_flag("--json", c.json, "The report as JSON (each feature by key: present true, false or null)");
  add_force_fallback(check, c.force_fallback);
  return check;
}

}  // namespace allocscope
