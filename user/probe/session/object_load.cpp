#include "probe/session/object_load.h"

#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>

#include "allocscope.h"
#include "allocscope.skel.h"

namespace allocscope {
namespace {

// A load that failed: privileges, or the verifier's refusal in one line
// (the program, its last word), the whole log left to -v.
std::string load_error(int err, const std::string& release, const std::string& messages) {
  VerifierRefusal r = verifier_refusal(messages);
  if (err == EPERM || r.program.empty()) return errno_message("load BPF programs", err) + privilege_hint(err);
  std::string why = r.reason.empty() ? errno_message("refused after verification", err) : r.reason;
  return "the kernel (" + release + ") refused allocscope's BPF program " + r.program + ": " + why +
         " (a bug of allocscope's: please report it with the output of `allocscope check -v`)";
}

using ProgramLogs = std::vector<std::pair<bpf_program*, std::vector<char>>>;

// libbpf's messages of a failed load, with the log of each program whose
// log went to a buffer of ours (verifier statistics) where libbpf shows it.
std::string with_program_logs(std::string messages, const ProgramLogs& logs) {
  for (const auto& [prog, log] : logs) {
    std::string failed = std::string("prog '") + bpf_program__name(prog) + "': BPF program load failed";
    if (size_t at = messages.find(failed); at != std::string::npos) {
      size_t end = messages.find('\n', at);
      messages.insert(
          end == std::string::npos ? messages.size() : end + 1,
          "-- BEGIN PROG LOAD LOG --\n" + std::string(log.data()) + "\n-- END PROG LOAD LOG --\n");
    }
  }
  return messages;
}

}  // namespace

std::string privilege_hint(int err) {
  if ((err == EPERM || err == EACCES) && geteuid() != 0)
    return " (allocscope needs root, or CAP_BPF and CAP_PERFMON: try sudo)";
  if (err == EACCES) return " (the kernel's verifier refused a program: -v prints its log)";
  return "";
}

Result<void> load_object(allocscope_bpf* skel, const std::string& release, ProgramStats* stats) {
  // With statistics asked for, each program's verifier log (level 4: the
  // statistics alone) goes to a buffer of its own.
  ProgramLogs logs;
  if (stats) {
    bpf_program* prog;
    bpf_object__for_each_program(prog, skel->obj) if (bpf_program__autoload(prog)) {
      logs.emplace_back(prog, std::vector<char>(1 << 16));
      bpf_program__set_log_buf(prog, logs.back().second.data(), logs.back().second.size());
      bpf_program__set_log_level(prog, 4);
    }
  }
  LibbpfCapture capture;  // the verifier's refusal, told in one line
  if (int err = allocscope_bpf__load(skel); err != 0)
    return fail(load_error(-err, release, with_program_logs(capture.text(), logs)), -err);
  for (auto& [prog, log] : logs)
    stats->emplace_back(bpf_program__name(prog), parse_verifier_stats(log.data()));
  return {};
}

}  // namespace allocscope
