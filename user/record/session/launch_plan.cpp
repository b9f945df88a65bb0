#include "record/session/launch_plan.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "host/env_command.h"
#include "host/preload_library.h"
#include "host/process.h"
#include "probe/tables/table_loader.h"
#include "record/scope.h"
#include "symbols/elf_file.h"

extern char** environ;

namespace allocscope {
namespace {

// The program and the libraries the loader will map for it (LD_PRELOAD's
// too, when the command sets it through env), before it runs.
std::vector<std::string> program_files(const std::string& program, const EnvCommand& command) {
  if (program.empty()) return {};
  std::vector<std::string> files = shared_libraries(program);
  files.push_back(program);
  // A bare name is looked for where the loader looks by default.
  for (const std::string& p : command.preloads) {
    if (p.find('/') != std::string::npos) {
      files.push_back(p);
      continue;
    }
    for (const char* dir : {"/lib/x86_64-linux-gnu/", "/usr/lib/x86_64-linux-gnu/", "/lib/", "/usr/lib/"})
      if (access((std::string(dir) + p).c_str(), R_OK) == 0) {
        files.push_back(dir + p);
        break;
      }
  }
  return files;
}

std::string plural(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

ProgramFacts program_facts(const std::string& program) {
  ProgramFacts f;
  struct stat st;
  if (program.empty() || stat(program.c_str(), &st) != 0) return f;
  f.found = true;
  f.set_id = (st.st_mode & (S_ISUID | S_ISGID)) != 0;
  auto elf = ElfFile::open(program);
  if (!elf) return f;
  f.elf = true;
  f.dynamic = !elf->interpreter().empty();
  if (f.dynamic) {
    std::vector<ElfSymbol> functions = elf->functions();
    f.own_malloc = std::any_of(functions.begin(), functions.end(),
                               [](const ElfSymbol& s) { return s.name == "malloc"; });
  }
  return f;
}

std::string in_process_refusal(const ProgramFacts& f) {
  if (!f.found) return "the program was not found";
  if (f.set_id) return "a set-id program ignores LD_PRELOAD";
  if (f.elf && !f.dynamic) return "a static program loads no library";
  if (f.own_malloc) return "the program defines malloc itself";
  return "";
}

Result<LaunchPlan> plan_launch(const RecordConfig& c) {
  LaunchPlan plan;
  EnvCommand command = through_env(c.command);
  std::string program = find_program(command.program);
  plan.files = program_files(program, command);
  if (c.launch == LaunchPath::Probes) return plan;
  if (c.launch == LaunchPath::Auto && c.probes_chosen()) {
    plan.why_probes = "the probes are what is measured or chosen";
    return plan;
  }
  // Every call traps either way, and a walk from inside the library costs
  // more: on g++ -c, 70 s in process against 21 s through probes.
  if (c.launch == LaunchPath::Auto && c.rate <= 1) {
    plan.why_probes = "exact mode";
    return plan;
  }
  auto library = find_preload_library();
  if (!library) {
    if (c.launch == LaunchPath::InProcess) return fail(library.error());
    plan.why_probes = library.error().message;
    return plan;
  }
  std::string refusal = in_process_refusal(program_facts(program));
  if (c.launch == LaunchPath::Auto && !refusal.empty()) {
    plan.why_probes = refusal;
    return plan;
  }
  plan.in_process = true;
  // The rest of the tree, where a process does not load the library.
  plan.probes = c.launch == LaunchPath::Auto && follows_children(c);
  plan.root_in_process = refusal.empty();
  plan.preload_library = *library;
  plan.files.push_back(*library);
  return plan;
}

Result<LaunchPlan> plan_launch_in_process_only(const RecordConfig& c) {
  EnvCommand command = through_env(c.command);
  std::string program = find_program(command.program);
  if (program.empty()) return fail("no such program: " + command.program, ENOENT);
  auto library = find_preload_library();
  if (!library) return fail(library.error());
  if (std::string refusal = in_process_refusal(program_facts(program)); !refusal.empty())
    return fail("without BPF only the preload library samples, and it cannot enter " + program + " (" +
                    refusal + "): run allocscope as root, or with CAP_BPF and CAP_PERFMON",
                EPERM);
  LaunchPlan plan;
  plan.files = program_files(program, command);
  plan.in_process = true;
  plan.probes = false;
  plan.root_in_process = true;
  plan.preload_library = *library;
  plan.files.push_back(*library);
  return plan;
}

std::vector<std::string> launch_environment(const LaunchPlan& plan, uint64_t rate) {
  std::vector<std::string> current;
  for (char** e = environ; *e; ++e) current.emplace_back(*e);
  return plan.in_process ? preload_environment(current, plan.preload_library, rate) : current;
}

std::vector<std::string> launch_command(const LaunchPlan& plan, const std::vector<std::string>& command) {
  return plan.in_process ? with_first_preload(command, plan.preload_library) : command;
}

std::string describe_sampling(const LaunchPlan& plan, uint64_t in_process, uint64_t through_probes) {
  if (!plan.in_process)
    return "allocator probes" + (plan.why_probes.empty() ? "" : " (" + plan.why_probes + ")");
  if (!plan.probes || !through_probes)
    return "in process (" + plural(in_process, "process", "processes") + ")";
  return "in process (" + plural(in_process, "process", "processes") + "), allocator probes (" +
         plural(through_probes, "process", "processes") + ")";
}

}  // namespace allocscope
