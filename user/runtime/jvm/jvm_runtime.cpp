#include "runtime/jvm/jvm_runtime.h"

#include <algorithm>
#include <utility>

#include "abi/preload/java_record.h"
#include "runtime/unread_heap.h"
#include "symbols/symbolizer.h"

namespace allocscope {

namespace {

constexpr std::string_view kRoom = "jvm";

// Why a JVM whose agent said nothing samples nothing.
std::string unread_why(const RuntimeSettings& settings) {
  if (settings.off.contains(std::string(kRoom))) return "left unsampled (--no-java-heap)";
  if (settings.rate == 1)
    return "exact mode (--rate 1) counts in the kernel's probes, and the JVM's heap has none; "
           "record at a rate to sample it";
  // Entered (-p, --all) or launched, a JVM runs the agent, which had not
  // reported when the recording ended (an entry takes a moment).
  if (settings.writes_processes || settings.system_wide)
    return "allocscope's JVMTI agent reported nothing from it before the recording ended (it starts a "
           "moment after allocscope enters a running JVM: record for longer)";
  return "allocscope's JVMTI agent is not in it (a JVM gets it when allocscope launches it, or enters it: "
         "-p)";
}

class JvmRuntime : public UnreadHeapRuntime {
 public:
  explicit JvmRuntime(const RuntimeServices& services)
      : UnreadHeapRuntime(services.symbolizer, is_jvm_library_name,
                          {std::string(kRoom), "the Java heap",
                           "its Java objects are not in the profile, only native allocations "
                           "(HotSpot's own, JNI code's, direct buffers')",
                           unread_why(services.settings)}),
        symbolizer_(services.symbolizer),
        enters_(services.settings.system_wide && !services.settings.off.contains(std::string(kRoom)) &&
                services.settings.rate > 1) {}

  // Under --all and the agent a JVM is entered (its library's agent then
  // samples it) once found: by a sample, or running at the start.
  void on_process(pid_t pid) override {
    if (enters_ && runs_now(pid)) judge(pid, "libjvm.so");
  }
  std::vector<pid_t> processes_to_enter(size_t most) override {
    size_t n = std::min(most, to_enter_.size());
    std::vector<pid_t> out(to_enter_.begin(), to_enter_.begin() + ptrdiff_t(n));
    to_enter_.erase(to_enter_.begin(), to_enter_.begin() + ptrdiff_t(n));
    return out;
  }

  void place_agent_frames(pid_t pid, std::string_view agent, std::span<const uint8_t> frames,
                          std::vector<uint64_t>& ips) override {
    if (agent != kRoom) return;
    heap_read(pid);
    ++samples_;
    if (!place_java_frames(symbolizer_, frames, ips)) ++malformed_;
  }
  void on_agent_note(pid_t pid, std::string_view agent, const std::string& text) override {
    if (agent == kRoom) heap_unread(pid, text);
  }
  void add_counters(KernelCounters kernel,
                    std::vector<std::pair<std::string, uint64_t>>& out) const override {
    UnreadHeapRuntime::add_counters(kernel, out);
    if (read_processes()) out.emplace_back("jvm_heap_read_processes", read_processes());
    if (samples_) out.emplace_back("java_samples", samples_);
    if (malformed_) out.emplace_back("java_stacks_malformed", malformed_);
  }
  std::vector<RuntimePath> paths() const override {
    if (!read_processes()) return {};
    return {{"java", "java",
             "the Java heap of " + std::to_string(read_processes()) +
                 " process(es) sampled by the JVM (JVMTI), " + std::to_string(samples_) + " samples"}};
  }

 private:
  void found(pid_t pid) override {
    if (enters_ && to_enter_.size() < kMaxToEnter) to_enter_.push_back(pid);
  }

  static constexpr size_t kMaxToEnter = 4096;  // asked for between two looks; more wait for a sample
  Symbolizer& symbolizer_;
  bool enters_;                  // its JVMs are to be entered (--all, the agent)
  std::vector<pid_t> to_enter_;  // found since the last look
  uint64_t samples_ = 0, malformed_ = 0;
};

}  // namespace

bool is_jvm_library_name(std::string_view name) { return name == "libjvm.so"; }

bool place_java_frames(Symbolizer& symbolizer, std::span<const uint8_t> frames, std::vector<uint64_t>& ips) {
  const uint8_t* at = frames.data();
  size_t left = frames.size();
  while (left > 0) {
    as_java_frame_head h{};
    const uint8_t* names = as_java_get_frame(at, left, &h);
    if (!names) return false;
    std::string function(reinterpret_cast<const char*>(names), h.function_len);
    std::string file(reinterpret_cast<const char*>(names) + h.function_len, h.file_len);
    ips.push_back(symbolizer.runtime_frame("java", function, file, h.line));
    size_t used = as_java_frame_bytes(h.function_len, h.file_len);
    at += used;
    left -= used;
  }
  return true;
}

std::unique_ptr<Runtime> make_jvm_runtime(const RuntimeServices& services) {
  return std::make_unique<JvmRuntime>(services);
}

}  // namespace allocscope
