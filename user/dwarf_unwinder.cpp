#include "dwarf_unwinder.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <tuple>

#include "process.h"

namespace allocscope {
namespace {

// Caches stay bounded for a long recording of many short-lived processes.
constexpr size_t kMaxProcesses = 256;
constexpr size_t kMaxFiles = 1024;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
  return buf;
}

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// Only executable file mappings can hold the pcs being unwound; a change in
// anything else (heap, anonymous memory, data files) keeps the session.
uint64_t code_fingerprint(const std::vector<Mapping>& maps) {
  uint64_t h = 0;
  for (const Mapping& m : maps) {
    if (!m.executable || !m.is_file())
      continue;
    h = mix(h, m.start);
    h = mix(h, m.end);
    h = mix(h, m.offset);
    h = mix(h, (uint64_t(m.dev_major) << 32) | m.dev_minor);
    h = mix(h, m.inode);
  }
  return h;
}

}  // namespace

// A binary opened once for every process that maps it. Each Dwfl_Module
// that uses it takes a libelf reference to the same Elf (elf_begin on an Elf
// just counts a reference), so a library mapped by a hundred processes is
// parsed, and holds memory, once; no file descriptor stays open.
struct DwarfUnwinder::File {
  struct Load {
    uint64_t vaddr, offset, filesz, memsz;
    bool writable, executable;
  };
  Elf* elf = nullptr;
  std::string path;  // as opened
  const uint8_t* image = nullptr;
  size_t image_size = 0;
  std::vector<Load> loads;
  uint64_t low_vaddr = 0;  // as libdwfl computes a module's base: first PT_LOAD, aligned down
  uint64_t high_vaddr = 0;

  ~File() {
    if (elf)
      elf_end(elf);
  }

  static std::shared_ptr<File> open(const std::string& path, uint64_t inode) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return nullptr;
    struct stat st;
    // The /proc/PID/root fallback can name a newer file than the mapped one;
    // its CFI would describe different code.
    if (fstat(fd, &st) != 0 || uint64_t(st.st_ino) != inode) {
      close(fd);
      return nullptr;
    }
    auto f = std::make_shared<File>();
    f->path = path;
    // The same mode libdwfl opens files with, which elf_begin requires of an
    // Elf it hands out references to.
    f->elf = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, nullptr);
    // Mapped (or read) whole: the descriptor is no longer needed.
    bool detached = f->elf && elf_cntl(f->elf, ELF_C_FDREAD) == 0;
    close(fd);
    if (!detached || !f->load_headers())
      return nullptr;
    return f;
  }

  bool load_headers() {
    GElf_Ehdr eh;
    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_machine != EM_X86_64 || (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
      return false;
    image = reinterpret_cast<const uint8_t*>(elf_rawfile(elf, &image_size));
    size_t n = 0;
    if (!image || elf_getphdrnum(elf, &n) != 0)
      return false;
    bool first = true;
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (!gelf_getphdr(elf, int(i), &ph) || ph.p_type != PT_LOAD)
        continue;
      if (first)  // the exact expression of libdwfl's open_elf, so that its bias is ours
        low_vaddr = ph.p_vaddr & -ph.p_align;
      first = false;
      high_vaddr = std::max(high_vaddr, ph.p_vaddr + ph.p_memsz);
      loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_W) != 0,
                       (ph.p_flags & PF_X) != 0});
    }
    return !loads.empty() && high_vaddr > low_vaddr;
  }

  // Load bias (runtime address - ELF vaddr) implied by mapping m: the segment
  // m's file offset falls in says which vaddr m.start holds.
  std::optional<uint64_t> bias_for(const Mapping& m) const {
    static const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    for (int pass = 0; pass < 2; ++pass) {
      for (const Load& l : loads) {
        if (pass == 0 && l.executable != m.executable)
          continue;  // text and data may share a file page; prefer the matching kind
        uint64_t first = l.offset & ~(page - 1);
        if (l.filesz > 0 && m.offset >= first && m.offset < l.offset + l.filesz)
          return m.start - (l.vaddr + (m.offset - l.offset));
      }
    }
    return std::nullopt;
  }
};

struct DwarfUnwinder::Process {
  struct Segment {
    uint64_t start, end;  // runtime addresses
    const uint8_t* data;  // the file's bytes for start
  };
  Dwfl* dwfl = nullptr;
  bool attached = false;
  std::string attach_error;
  uint64_t fingerprint = 0;
  uint64_t last_used = 0;
  // Every file a reported module uses (their find_elf reads it lazily) and
  // the one whose Elf picked the architecture backend at attach time.
  std::vector<std::shared_ptr<File>> files;
  std::shared_ptr<File> arch_file;
  std::vector<Segment> readonly;  // sorted by start

  // The unwind in progress.
  const StackSnapshot* snap = nullptr;
  bool read_failed = false;
  uint64_t failed_addr = 0;

  ~Process() {
    if (dwfl)
      dwfl_end(dwfl);  // before `files` lets go of the Elf handles
  }

  bool read(uint64_t addr, Dwarf_Word* out) {
    const StackSnapshot& s = *snap;
    uint64_t off = addr - s.sp;
    if (addr >= s.sp && off < s.stack.size() && s.stack.size() - off >= sizeof *out) {
      std::memcpy(out, s.stack.data() + off, sizeof *out);
      return true;
    }
    auto it = std::upper_bound(readonly.begin(), readonly.end(), addr,
                               [](uint64_t a, const Segment& seg) { return a < seg.start; });
    if (it != readonly.begin()) {
      --it;
      if (addr < it->end && it->end - addr >= sizeof *out) {
        std::memcpy(out, it->data + (addr - it->start), sizeof *out);
        return true;
      }
    }
    read_failed = true;
    failed_addr = addr;
    return false;
  }
};

namespace {

using Process = DwarfUnwinder::Process;

// Hands libdwfl a reference to the shared Elf instead of letting it open the
// file again (which would also keep a descriptor per module per process).
int find_elf(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, char** file_name, Elf** elfp) {
  auto* file = static_cast<DwarfUnwinder::File*>(*userdata);
  *elfp = nullptr;
  if (!file)
    return -1;
  *elfp = elf_begin(-1, ELF_C_READ_MMAP_PRIVATE, file->elf);  // one more reference
  if (*elfp && !*file_name)
    *file_name = strdup(file->path.c_str());
  return -1;  // no descriptor for libdwfl to own or close
}

char* no_debuginfo_path = nullptr;  // libdwfl's default search path, /usr/lib/debug

// dwfl_build_id_find_debuginfo (for .debug_frame when .eh_frame lacks an FDE)
// looks only in local build-id directories: dwfl_standard_find_debuginfo may
// ask debuginfod servers over the network in the middle of a recording.
const Dwfl_Callbacks kDwflCallbacks = {
    .find_elf = find_elf,
    .find_debuginfo = dwfl_build_id_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &no_debuginfo_path,
};

// The process state is the snapshot: one thread, whose registers it holds.
pid_t next_thread(Dwfl*, void* arg, void** thread_arg) {
  if (*thread_arg)
    return 0;
  *thread_arg = arg;
  return dwfl_pid(static_cast<Process*>(arg)->dwfl);
}

bool get_thread(Dwfl*, pid_t, void* arg, void** thread_arg) {
  *thread_arg = arg;
  return true;
}

bool memory_read(Dwfl*, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  return static_cast<Process*>(arg)->read(addr, result);
}

bool set_initial_registers(Dwfl_Thread* thread, void* thread_arg) {
  const StackSnapshot& s = *static_cast<Process*>(thread_arg)->snap;
  Dwarf_Word regs[kDwarfRegCount];
  std::copy(std::begin(s.regs), std::end(s.regs), regs);
  return dwfl_thread_state_registers(thread, 0, kDwarfRegCount, regs);
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
    .detach = nullptr,
    .thread_detach = nullptr,
};

struct Walk {
  Process* p;
  UnwindResult* out;
  size_t max_frames;
  bool hit_limit = false;
};

int on_frame(Dwfl_Frame* frame, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  if (w->out->ips.size() >= w->max_frames) {
    w->hit_limit = true;
    return DWARF_CB_ABORT;
  }
  // Asking for isactivation unwinds the frame above right here, so a failed
  // read recorded from now on belongs to this step.
  w->p->read_failed = false;
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation))
    return DWARF_CB_ABORT;
  w->out->ips.push_back(pc);
  w->out->activation.push_back(activation ? 1 : 0);
  return DWARF_CB_OK;
}

}  // namespace

DwarfUnwinder::DwarfUnwinder(PathFor path_for) : path_for_(std::move(path_for)) {
  elf_version(EV_CURRENT);
  if (!path_for_)
    path_for_ = mapped_file_path;
}

DwarfUnwinder::~DwarfUnwinder() = default;

void DwarfUnwinder::forget(pid_t pid) {
  processes_.erase(pid);
  prune_files();
}

std::shared_ptr<DwarfUnwinder::File> DwarfUnwinder::file_for(pid_t pid, const Mapping& m) {
  FileKey key{(uint64_t(m.dev_major) << 32) | m.dev_minor, m.inode};
  if (auto it = files_.find(key); it != files_.end())
    return it->second;
  auto file = File::open(path_for_(pid, m), m.inode);
  if (file)
    files_.emplace(key, file);
  return file;
}

// Tells the process's Dwfl which binaries are where. On a re-report libdwfl
// keeps every module reported again with the same name and range, with its
// parsed CFI, and drops the rest.
void DwarfUnwinder::report_modules(pid_t pid, Process& p, const std::vector<Mapping>& maps) {
  struct Planned {
    uint64_t low, high, bias;
    std::string name;
    std::shared_ptr<File> file;
  };
  std::vector<Planned> planned;
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> seen;  // dev, inode, bias
  for (const Mapping& m : maps) {
    if (!m.executable || !m.is_file())
      continue;
    auto file = file_for(pid, m);
    if (!file)
      continue;
    auto bias = file->bias_for(m);
    uint64_t dev = (uint64_t(m.dev_major) << 32) | m.dev_minor;
    if (!bias || !seen.emplace(dev, m.inode, *bias).second)
      continue;
    // dev:inode in the name: a file replaced at the same address is a new module.
    std::string name = m.path + " [" + hex(dev) + ":" + std::to_string(m.inode) + "]";
    planned.push_back({*bias + file->low_vaddr, *bias + file->high_vaddr, *bias, std::move(name), file});
  }
  std::sort(planned.begin(), planned.end(), [](const Planned& a, const Planned& b) { return a.low < b.low; });

  std::vector<std::shared_ptr<File>> files;
  std::vector<Process::Segment> readonly;
  dwfl_report_begin(p.dwfl);
  uint64_t reported_end = 0;
  for (Planned& pl : planned) {
    if (pl.low < reported_end)  // overlapping modules would confuse address lookup
      continue;
    Dwfl_Module* mod = dwfl_report_module(p.dwfl, pl.name.c_str(), pl.low, pl.high);
    if (!mod)
      continue;
    reported_end = pl.high;
    void** userdata = nullptr;
    dwfl_module_info(mod, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    *userdata = pl.file.get();
    // Read-only segments hold the same bytes in memory as in the file;
    // writable ones (including RELRO, relocated before it is sealed) do not.
    for (const File::Load& l : pl.file->loads)
      if (!l.writable && l.filesz > 0 && l.offset + l.filesz <= pl.file->image_size)
        readonly.push_back({pl.bias + l.vaddr, pl.bias + l.vaddr + l.filesz, pl.file->image + l.offset});
    files.push_back(std::move(pl.file));
  }
  dwfl_report_end(p.dwfl, nullptr, nullptr);
  std::sort(readonly.begin(), readonly.end(),
            [](const Process::Segment& a, const Process::Segment& b) { return a.start < b.start; });
  p.readonly = std::move(readonly);
  p.files = std::move(files);  // after report_end: dropped modules no longer point at old files

  if (!p.attached) {
    if (p.files.empty()) {
      p.attach_error = "no readable x86-64 ELF file is mapped executable";
      return;
    }
    // An explicit Elf gives the process a backend of its own, which survives
    // the module it came from being dropped by a later re-report.
    p.arch_file = p.files.front();
    p.attached = dwfl_attach_state(p.dwfl, p.arch_file->elf, pid, &kThreadCallbacks, &p);
    p.attach_error = p.attached ? "" : std::string("attach unwind state: ") + dwfl_errmsg(-1);
  }
}

DwarfUnwinder::Process* DwarfUnwinder::process_for(pid_t pid, const std::vector<Mapping>& maps) {
  uint64_t fp = code_fingerprint(maps);
  auto it = processes_.find(pid);
  if (it == processes_.end()) {
    if (processes_.size() >= kMaxProcesses)
      evict_oldest_process();
    auto p = std::make_unique<Process>();
    p->dwfl = dwfl_begin(&kDwflCallbacks);
    if (!p->dwfl)
      return nullptr;
    report_modules(pid, *p, maps);
    p->fingerprint = fp;
    it = processes_.emplace(pid, std::move(p)).first;
    if (files_.size() > kMaxFiles)
      prune_files();
  } else if (it->second->fingerprint != fp) {
    report_modules(pid, *it->second, maps);
    it->second->fingerprint = fp;
  }
  it->second->last_used = ++clock_;
  return it->second.get();
}

void DwarfUnwinder::evict_oldest_process() {
  auto oldest = std::min_element(processes_.begin(), processes_.end(), [](const auto& a, const auto& b) {
    return a.second->last_used < b.second->last_used;
  });
  if (oldest != processes_.end())
    processes_.erase(oldest);
  prune_files();
}

// Files no process session uses any more.
void DwarfUnwinder::prune_files() {
  std::erase_if(files_, [](const auto& kv) { return kv.second.use_count() == 1; });
}

UnwindResult DwarfUnwinder::unwind(pid_t pid, const std::vector<Mapping>& maps, const StackSnapshot& snap,
                                   size_t max_frames) {
  UnwindResult r;
  if (max_frames == 0)
    return r;
  Process* p = process_for(pid, maps);
  if (!p || !p->attached) {
    r.truncated = true;
    r.stop_reason = p ? p->attach_error : "libdwfl session: " + std::string(dwfl_errmsg(-1));
    return r;
  }
  p->snap = &snap;
  p->read_failed = false;
  Walk walk{p, &r, max_frames};
  int rc = dwfl_getthread_frames(p->dwfl, pid, on_frame, &walk);
  p->snap = nullptr;
  if (walk.hit_limit) {
    r.truncated = true;
    r.stop_reason = "frame limit (" + std::to_string(max_frames) + ") reached";
    return r;
  }
  // libdwfl ends without an error both when the CFI says the return address
  // is undefined (the outermost frame: _start, clone) and when it could not
  // read it; only the failed read tells the second case apart.
  if (rc == 0 && !p->read_failed)
    return r;

  r.truncated = true;
  if (r.ips.empty()) {
    r.stop_reason = std::string("initial registers: ") + dwfl_errmsg(-1);
    return r;
  }
  // Why the last frame could not be unwound.
  uint64_t pc = r.ips.back();
  uint64_t lookup = r.activation.back() ? pc : pc - 1;
  const Mapping* m = find_mapping(maps, lookup);
  std::string where = hex(pc) + (m ? " in " + (m->path.empty() ? std::string("[anon]") : m->path) : "");
  if (!m)
    r.stop_reason = hex(pc) + " is in no mapping";
  else if (m->path == "[uprobes]")
    r.stop_reason = where + ": a return address replaced by a uretprobe trampoline";
  else if (!dwfl_addrmodule(p->dwfl, lookup))  // libdwfl tried rbp as a frame pointer, in vain
    r.stop_reason = where + ": not in an ELF file this process maps executable";
  else if (p->read_failed)
    r.stop_reason = "unwinding " + where + " reads " + hex(p->failed_addr) + ", outside the " +
                    std::to_string(snap.stack.size()) + "-byte stack copy at " + hex(snap.sp);
  else
    r.stop_reason = "no call frame information for " + where + ": " + dwfl_errmsg(-1);
  return r;
}

}  // namespace allocscope
