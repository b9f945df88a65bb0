#include "runtime/python/python_runtime.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <regex>

#include "host/process.h"
#include "host/process_memory.h"
#include "probe/placement/allocator_entries.h"
#include "probe/session/bpf_session.h"
#include "runtime/python/placement.h"
#include "runtime/python/without_bpf.h"

namespace allocscope {
namespace {

constexpr size_t kMaxRefusals = 16;
constexpr size_t kMaxOtherPrograms = 4096;  // files known not to be walkable, remembered

uint32_t kernel_dev_of(const Mapping& m) { return m.dev_major << 20 | m.dev_minor; }

std::string base_name(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string::npos ? path : path.substr(slash + 1));
}

// A library named as CPython's runtime is (libpython3.12.so.1.0,
// libpython3.7m.so, libpython2.7.so): its version as the name has it.
std::optional<std::string> runtime_library_version(std::string_view path) {
  static const std::regex name(R"(^libpython(\d+(\.\d+)?)[a-z]*\.so)");
  std::smatch m;
  std::string base = base_name(path);
  if (!std::regex_search(base, m, name)) return std::nullopt;
  return m[1].str();
}

// Where a field of the stack record lies in its runtime part (from npy on).
constexpr size_t in_part(size_t offset) { return offset - offsetof(as_stack_event, npy); }

// The Python frames a stack carries (none when it has none).
std::vector<as_py_frame> python_frames_of(std::span<const uint8_t> part, uint64_t* ends) {
  constexpr size_t kFrames = in_part(offsetof(as_stack_event, py));
  if (part.size() < kFrames) return {};
  uint32_t n = 0;
  std::memcpy(&n, part.data() + in_part(offsetof(as_stack_event, npy)), sizeof n);
  std::memcpy(ends, part.data() + in_part(offsetof(as_stack_event, py_ends)), sizeof *ends);
  n = std::min<uint32_t>(n, AS_MAX_PY_FRAMES);
  if (part.size() < kFrames + n * sizeof(as_py_frame))
    return {};  // sent alone: it ends with the last valid one
  std::vector<as_py_frame> frames(n);
  if (n) std::memcpy(frames.data(), part.data() + kFrames, n * sizeof(as_py_frame));
  return frames;
}

std::string program_path(pid_t pid) {
  char buf[4096];
  ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), buf, sizeof buf);
  return n > 0 ? std::string(buf, size_t(n)) : "process " + std::to_string(pid) + "'s program";
}

}  // namespace

PythonRuntime::PythonRuntime(Symbolizer& symbolizer, Publish publish, PublishProcess publish_process)
    : symbolizer_(symbolizer), publish_(std::move(publish)), publish_process_(std::move(publish_process)) {}

void PythonRuntime::on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino) {
  FileKey key{kernel_dev, ino};
  auto it = programs_.find(key);
  const Program* program = it != programs_.end()
                               ? it->second.get()
                               : learn(key, "/proc/" + std::to_string(pid) + "/exe", program_path(pid));
  if (!program) return;
  uint64_t start = process_start_code(pid);
  if (start && processes_.size() < kMaxProcesses)
    processes_[pid] = {program, start - program->layout.kernel.exec_vaddr};
}

void PythonRuntime::on_process(pid_t pid) {
  if (from_process(pid).program) return;
  auto maps = read_maps(pid);
  if (!maps) return;
  for (const Mapping& m : *maps)
    if (m.executable && m.is_file() && runtime_library_version(m.path)) {
      from_library(pid, m);
      return;
    }
}

void PythonRuntime::on_mapping(pid_t pid, uint64_t addr, std::string_view name) {
  if (!runtime_library_version(name)) return;
  auto maps = read_maps(pid);
  if (!maps) return;
  if (const Mapping* m = find_mapping(*maps, addr); m && m->is_file()) from_library(pid, *m);
}

void PythonRuntime::on_files(const std::vector<std::string>& paths) {
  for (const std::string& path : paths)
    if (runtime_library_version(path)) learn_library(path, path);
}

// The library's runtime, walked in `pid` from the load bias of mapping `m`.
void PythonRuntime::from_library(pid_t pid, const Mapping& m) {
  const Program* program = learn_library(mapped_file_path(pid, m), m.path);
  if (!program) return;
  for (const ElfFile::Segment& s : program->segments) {
    if (m.offset < s.offset || m.offset >= s.offset + s.size) continue;
    uint64_t bias = m.start - (m.offset - s.offset + s.vaddr);
    if (!publish_process_(pid, as_py_process{program->layout.kernel, bias})) {
      ++counters_.processes_unwalked;
      return;
    }
    ++counters_.library_processes;
    if (processes_.size() < kMaxProcesses) processes_[pid] = {program, bias};
    return;
  }
}

// A library by its path: its key is the file's own (the kernel's vma's,
// where /proc's maps may name an overlay's).
const PythonRuntime::Program* PythonRuntime::learn_library(const std::string& path,
                                                           const std::string& shown) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return nullptr;
  FileKey key{uint32_t(major(st.st_dev) << 20 | minor(st.st_dev)), st.st_ino};
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();
  return learn(key, path, shown);
}

void PythonRuntime::refuse(const std::string& shown, const std::string& version, const std::string& why) {
  ++counters_.unsupported;
  if (refusals_.size() < kMaxRefusals)
    refusals_.push_back("no frames for " + shown + " (" + version + "): " + why);
}

// The process's program through its executable (while it lives).
PythonRuntime::Found PythonRuntime::from_process(pid_t pid) {
  struct stat st;
  std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  if (stat(exe.c_str(), &st) != 0) return {};
  on_program(pid, uint32_t(major(st.st_dev) << 20 | minor(st.st_dev)), st.st_ino);
  auto it = processes_.find(pid);
  return it == processes_.end() ? Found{} : it->second;
}

// Reads the file (through the process, which may have run another program
// since: then it is left for that program's event) and tells the kernel.
// `shown`: its name in a refusal.
const PythonRuntime::Program* PythonRuntime::learn(const FileKey& key, const std::string& path,
                                                   const std::string& shown) {
  auto elf = ElfFile::open(path);
  if (!elf) return nullptr;
  auto id = elf->identity();
  if (!id || id->inode != key.second || (id->dev_major << 20 | id->dev_minor) != key.first) return nullptr;
  size_t others = 0;
  for (const auto& [k, p] : programs_) others += !p;
  if (others >= kMaxOtherPrograms) {  // bounded: forget them (read again if run again)
    std::erase_if(programs_, [](const auto& e) { return !e.second; });
    others = 0;
  }
  auto program = read_python_program(*elf);
  if (!program) {
    programs_[key] = nullptr;
    const std::string& why = program.error().message;
    auto named = runtime_library_version(shown);
    if (program.error().cause ==
        Cause::NoPythonRuntime) {  // a library named as CPython's runtime is never passed over
      if (named)
        refuse(shown, *named,
               *named < "3" ? "allocscope walks the frames of CPython 3.8 to 3.15"
                            : "no CPython runtime symbols (_PyRuntime, PyCode_Type): a stripped build?");
      return nullptr;
    }
    size_t colon = why.find(": ");
    refuse(shown, colon == std::string::npos ? "?" : why.substr(0, colon),
           colon == std::string::npos ? why : why.substr(colon + 2));
    return nullptr;
  }
  if (programs_.size() - others >= kMaxPrograms || !publish_(key.first, key.second, program->kernel)) {
    programs_[key] = nullptr;
    refuse(shown, program->version(), "no room left in the kernel's table of CPython runtimes");
    return nullptr;
  }
  auto& made = programs_[key] = std::make_unique<Program>(Program{std::move(*program), elf->segments()});
  ++counters_.programs;
  return made.get();
}

// The process's CPython program and its load bias: as found before, or from
// a mapping of it, or from the process.
PythonRuntime::Found PythonRuntime::find_program(pid_t pid, std::span<const Mapping> kernel_maps) {
  if (auto it = processes_.find(pid); it != processes_.end()) return it->second;
  auto from = [this](std::span<const Mapping> maps) -> Found {
    for (const Mapping& m : maps) {
      auto it = programs_.find({kernel_dev_of(m), m.inode});
      if (it == programs_.end() || !it->second) continue;
      for (const ElfFile::Segment& s : it->second->segments)
        if (m.offset >= s.offset && m.offset < s.offset + s.size)
          return {it->second.get(), m.start - (m.offset - s.offset + s.vaddr)};
    }
    return {};
  };
  Found found = from(kernel_maps);
  if (!found.program) found = from(symbolizer_.maps(pid));
  if (!found.program) return from_process(pid);
  if (processes_.size() < kMaxProcesses) processes_[pid] = found;
  return found;
}

const PythonRuntime::Code& PythonRuntime::code(pid_t pid, const Found& found, const as_py_frame& frame) {
  auto& codes = codes_[pid];
  // By address and stamp: a code object that reuses a freed one's memory
  // (a module's top level, at line 1 as every module's) has another stamp.
  auto key = std::pair{frame.code, frame.stamp};
  if (auto it = codes.find(key); it != codes.end()) return it->second;
  if (cached_ >= kMaxCodes) {  // bounded: start afresh (costs reads, never a wrong name)
    for (auto& [p, c] : codes_) c.clear();
    cached_ = 0;
    ++counters_.cache_cleared;
  }
  const PythonProgram& p = found.program->layout;
  Code read = read_python_code(
      p.objects, p.code_type + found.bias, frame.code, frame.stamp,
      [pid](uint64_t addr, std::span<uint8_t> out) { return read_process_memory(pid, addr, out); });
  ++(read ? counters_.codes_read : counters_.codes_unreadable);
  ++cached_;
  return codes.emplace(key, std::move(read)).first->second;
}

void PythonRuntime::read_stack(pid_t pid, std::span<const Mapping> kernel_maps,
                               std::span<const uint8_t> runtime_part) {
  uint64_t ends = 0;
  std::vector<as_py_frame> frames = python_frames_of(runtime_part, &ends);
  if (frames.empty()) return;
  Found found = find_program(pid, kernel_maps);
  if (!found.program) return;
  for (const as_py_frame& f : frames) code(pid, found, f);
}

void PythonRuntime::place_frames(pid_t pid, std::span<const Mapping> kernel_maps,
                                 std::span<const uint8_t> runtime_part, uint16_t fn,
                                 std::vector<uint64_t>& ips) {
  uint64_t ends = 0;
  std::vector<as_py_frame> frames = python_frames_of(runtime_part, &ends);
  if (!frames.empty()) place(pid, kernel_maps, frames, ends, fn, ips);
}

void PythonRuntime::place(pid_t pid, std::span<const Mapping> kernel_maps,
                          std::span<const as_py_frame> frames, uint64_t ends, uint16_t fn,
                          std::vector<uint64_t>& ips) {
  Found found = find_program(pid, kernel_maps);
  if (!found.program || frames.empty()) return;
  const PythonProgram& p = found.program->layout;
  versions_.insert(p.version());
  if (in_domain_.size() < kMaxProcesses || in_domain_.contains(pid))
    in_domain_[pid] |=
        entry_name(fn).starts_with("Py");  // PyObject_Malloc and the like: the preload library's
  std::vector<bool> is_loop;
  for (uint64_t ip : ips)  // a return address: the call is before it
    is_loop.push_back(ip > found.bias + p.eval_start && ip <= found.bias + p.eval_end);
  std::vector<PlacedPythonFrame> placed;
  for (size_t i = 0; i < frames.size(); ++i) {
    PlacedPythonFrame f{0, i < 64 && ((ends >> i) & 1)};
    const Code& c = code(pid, found, frames[i]);
    if (!c)
      f.ip = symbolizer_.runtime_frame("python", "[python code unreadable]", "", 0);
    else if (frames[i].instr == AS_PY_INSTR_UNKNOWN || int64_t(frames[i].instr) >= c->first_traceable)
      f.ip = symbolizer_.runtime_frame("python", c->qualname, c->filename, python_line(*c, frames[i].instr));
    placed.push_back(f);  // before first_traceable: a call still setting its frame up, not shown
  }
  PythonPlacement result = place_python_frames(ips, is_loop, placed);
  counters_.unplaced += result.unplaced;
  ips = std::move(result.ips);
}

std::vector<RuntimePath> PythonRuntime::paths() const {
  std::vector<RuntimePath> out;
  std::string refused;
  for (const std::string& r : refusals_) refused += (refused.empty() ? "" : "; ") + r;
  if (!refused.empty()) out.push_back({"python_refused", "", refused});  // said among the warnings
  if (versions_.empty()) return out;
  std::string versions;
  for (const std::string& v : versions_) versions += (versions.empty() ? "" : ", ") + v;
  out.push_back({"python", "python", "frames of CPython " + versions});
  size_t uncounted = 0;
  for (const auto& [pid, counted] : in_domain_) uncounted += !counted;
  if (uncounted)
    out.push_back({"python_small_objects", "python's small objects",
                   "not counted in " + std::to_string(uncounted) +
                       (uncounted == 1 ? " process" : " processes") +
                       " (objects of up to 512 bytes come from CPython's own allocator, counted only in a "
                       "process allocscope launched or entered)"});
  return out;
}

std::vector<std::string> PythonRuntime::warnings(KernelCounters kernel) const {
  std::vector<std::string> out;
  for (const std::string& r : refusals_) out.push_back("warning: python: " + r);
  if (uint64_t unnamed = counters_.unsupported - refusals_.size())
    out.push_back("warning: python: no frames for " + std::to_string(unnamed) + " more runtime(s)");
  if (uint64_t unwalked = counters_.processes_unwalked + kernel[AS_CNT_PY_PROCESSES_FULL])
    out.push_back("warning: python: no frames for " + std::to_string(unwalked) +
                  " process(es) running CPython from a library: the kernel's table of them (" +
                  std::to_string(AS_PY_MAX_PROCESSES) + ") was full");
  if (uint64_t gone = counters_.codes_unreadable)
    out.push_back("warning: python: " + std::to_string(gone) +
                  " code object(s) were freed before they could be read (a module's top-level code, run once "
                  "at import, ended before allocscope reached its samples): their frames show as "
                  "[python code unreadable]");
  return out;
}

void PythonRuntime::add_counters(KernelCounters kernel,
                                 std::vector<std::pair<std::string, uint64_t>>& out) const {
  const PythonCounters& c = counters_;
  out.insert(out.end(),
             {{"python_stacks", kernel[AS_CNT_PY_STACKS]},
              {"python_without_thread_state", kernel[AS_CNT_PY_NO_THREAD]},
              {"python_frames", kernel[AS_CNT_PY_FRAMES]},
              {"python_stacks_cut", kernel[AS_CNT_PY_DEPTH]},
              {"python_programs", c.programs},
              {"python_programs_refused", c.unsupported},
              {"python_library_processes", c.library_processes},
              {"python_processes_unwalked", c.processes_unwalked + kernel[AS_CNT_PY_PROCESSES_FULL]},
              {"python_codes_read", c.codes_read},
              {"python_codes_unreadable", c.codes_unreadable},
              {"python_frames_unplaced", c.unplaced},
              {"python_code_cache_cleared", c.cache_cleared},
              {"python_frames_table_full", symbolizer_.runtime_frames_full()}});
}

void PythonRuntime::forget(pid_t pid) {
  processes_.erase(pid);
  auto it = codes_.find(pid);
  if (it == codes_.end()) return;
  cached_ -= std::min(cached_, it->second.size());
  codes_.erase(it);
}

std::unique_ptr<Runtime> make_python_runtime(const RuntimeServices& services) {
  if (!services.session) return std::make_unique<PythonWithoutBpf>();  // the kernel walks Python's frames
  auto files = services.session->typed_map<as_file_key, as_py_layout>("python_files");
  auto processes = services.session->typed_map<uint32_t, as_py_process>("python_processes");
  if (!files || !processes) {  // allocscope's own BPF object without them: a defect, said
    std::fprintf(stderr, "allocscope: warning: python: no frames: %s\n",
                 (files ? processes.error() : files.error()).message.c_str());
    return nullptr;
  }
  return std::make_unique<PythonRuntime>(
      services.symbolizer,
      [files = std::move(*files)](uint32_t dev, uint64_t ino, const as_py_layout& layout) {
        return files.put({.ino = ino, .dev = dev, .pad = 0}, layout, "remember a Python program").has_value();
      },
      [processes = std::move(*processes)](pid_t pid, const as_py_process& process) {
        return processes.put(uint32_t(pid), process, "remember a process running CPython from a library")
            .has_value();
      });
}

}  // namespace allocscope
