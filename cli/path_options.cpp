// How record samples its processes: in process or through the allocator's
// probes, with BPF or without, running processes entered or not; and the
// benchmarks' switches.
#include "options.h"

namespace allocscope {

PathOptions add_path_options(CLI::App* rec, RecordConfig& c) {
  PathOptions o;
  o.preload = rec->add_flag_function(
      "--preload", [&c](int64_t) { c.launch = LaunchPath::InProcess; },
      "With -- CMD: sample in process only (liballocscope-preload.so through LD_PRELOAD); a process that "
      "does not load it (static, set-id, environment cleared) is not recorded");
  rec->add_flag_function(
         "--probes", [&c](int64_t) { c.launch = LaunchPath::Probes; },
         "With -- CMD: probe the allocator in every process, a trap into the kernel on every call. By "
         "default a launched command samples in process wherever it loads liballocscope-preload.so (several "
         "times cheaper; the same estimates), and is probed elsewhere")
      ->excludes(o.preload);
  o.no_bpf =
      rec->add_flag("--no-bpf", c.no_bpf,
                    "With -- CMD: no BPF at all (no root needed; the default when allocscope may not load "
                    "BPF): the preload library samples, stacks are unwound here");
  o.no_bpf->excludes("--probes");
  rec->add_flag("!--no-inject", c.inject,
                "Probe each process's allocator (a trap into the kernel at every call) and enter none. By "
                "default -p loads liballocscope-preload.so into its processes, and --all into each process "
                "whose traps cost it over 1% of a core: an entered process samples itself and sends only "
                "its sampled allocations to the kernel");
  // Benchmark switches (BENCHMARKS.md): not for everyday use.
  rec->add_flag("--null-probes", c.null_probes, "Probes that do nothing: the overhead floor")->group("");
  rec->add_flag("--naive-placement", c.naive_placement, "Every probe on its function's entry")->group("");
  rec->add_flag("--frees-trap", c.frees_trap, "In process, sampled: frees of sampled blocks trap, no ring")
      ->group("");
  return o;
}

}  // namespace allocscope
