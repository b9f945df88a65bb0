#include "symbols/symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <utility>

#include "host/files.h"
#include "host/process.h"
#include "symbols/demangle.h"
#include "symbols/elf_file.h"
#include "symbols/runtime_tables.h"
#include "symbols/signal_trampoline.h"

namespace allocscope {

namespace {

constexpr size_t kMaxPerfMapBytes = size_t{256} << 20;  // a large JIT's map is tens of MiB
// A debug section libdw would inflate past this is not read (a crafted
// one claims any size); libLLVM's largest, .debug_info, is about 700 MiB.
constexpr uint64_t kMaxInflatedSection = uint64_t{2} << 30;
std::atomic<uint64_t> g_debug_refused{0};  // libdwfl's callback has no context of ours

// dwfl_standard_find_debuginfo's file, unless a section of it inflates past
// the bound.
int find_bounded_debuginfo(Dwfl_Module* mod, void** userdata, const char* modname, Dwarf_Addr base,
                           const char* file_name, const char* debuglink_file, GElf_Word debuglink_crc,
                           char** debuginfo_file_name) {
  int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
  if (fd < 0) return fd;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  bool over = largest_inflated_section(elf) > kMaxInflatedSection;
  elf_end(elf);
  if (!over) return fd;
  close(fd);
  free(*debuginfo_file_name);
  *debuginfo_file_name = nullptr;
  ++g_debug_refused;
  return -1;
}

}  // namespace

// One binary, opened with libdwfl as a module of its own.
struct Symbolizer::Module {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  Elf* elf = nullptr;
  Dwarf_Addr bias = 0;
  std::string basename;
  std::string build_id;  // hex, "" when unknown
  // Per ELF address: a recording asks for the same return addresses in many
  // stacks, and a DWARF scope walk is far dearer than a map lookup.
  std::unordered_map<uint64_t, std::vector<SourceFrame>> frames;
  DwarfIndex dwarf_index;
  // A runtime's own tables (a Go program's function table), for what neither
  // DWARF nor a symbol names (a stripped Go program's code); read on first need.
  const RuntimeTablesReaders* readers = nullptr;
  std::unique_ptr<RuntimeTables> runtime;
  bool runtime_read = false;
  bool dwarf_refused = false;  // its own debug sections inflate past the bound: symbols only

  // Takes `fd`, opened on the binary (open_path names it in messages).
  Module(UniqueFd fd, const std::string& open_path, const std::string& shown_path,
         const RuntimeTablesReaders& runtime_readers)
      : readers(&runtime_readers) {
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = find_bounded_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    basename = shown_path.substr(shown_path.rfind('/') + 1);
    dwfl = dwfl_begin(&callbacks);
    if (!dwfl) return;
    // libdwfl keeps the descriptor it is given once the module is made.
    mod = dwfl_report_elf(dwfl, basename.c_str(), open_path.c_str(), fd.get(), 0, false);
    if (mod) fd.release();
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod) elf = dwfl_module_getelf(mod, &bias);
    build_id = read_build_id();
    dwarf_refused = largest_inflated_section(elf) > kMaxInflatedSection;
    if (dwarf_refused) ++g_debug_refused;
  }
  ~Module() {
    if (dwfl) dwfl_end(dwfl);
  }

  // ELF virtual address of a file offset, through the loadable segments.
  bool offset_to_vaddr(uint64_t offset, uint64_t* vaddr) const {
    size_t n = 0;
    if (!elf || elf_getphdrnum(elf, &n) != 0) return false;
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD && offset >= ph.p_offset &&
          offset < ph.p_offset + ph.p_filesz) {
        *vaddr = offset - ph.p_offset + ph.p_vaddr;
        return true;
      }
    }
    return false;
  }

  // The module's function symbols (its own and its debug file's), sorted:
  // libdwfl's address lookup scans every symbol, which on libLLVM's 50,000
  // costs ~0.2 ms an address.
  struct Symbol {
    uint64_t start, size;  // module addresses (ELF vaddr + bias)
    int rank;              // among aliases: global before weak before local
    const char* name;
  };
  std::vector<Symbol> symbols;
  bool symbols_read = false;

  void read_symbols() {
    symbols_read = true;
    int n = mod ? dwfl_module_getsymtab(mod) : -1;
    for (int i = 1; i < n; ++i) {
      GElf_Sym sym;
      GElf_Addr addr;
      const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, nullptr, nullptr, nullptr);
      if (!name || !*name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
      int bind = GELF_ST_BIND(sym.st_info);
      symbols.push_back({addr, sym.st_size, bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2, name});
    }
    std::sort(symbols.begin(), symbols.end(), [](const Symbol& a, const Symbol& b) {
      return a.start != b.start ? a.start < b.start : a.rank < b.rank;
    });
  }

  // {demangled, system} names of the function at vaddr; empty when unknown.
  std::pair<std::string, std::string> names_at(uint64_t vaddr) {
    if (!symbols_read) read_symbols();
    uint64_t addr = vaddr + bias;
    auto it = std::upper_bound(symbols.begin(), symbols.end(), addr,
                               [](uint64_t a, const Symbol& s) { return a < s.start; });
    if (it == symbols.begin()) return {};
    uint64_t start = (it - 1)->start;
    while (it != symbols.begin() && (it - 1)->start == start)  // the first alias: the best ranked
      --it;
    // Sized symbols end where they say; unsized ones at the next symbol.
    if (it->size && addr >= it->start + it->size) return {};
    // Versioned .dynsym names ("__libc_start_main@@GLIBC_2.34") print
    // without their version.
    std::string plain(it->name, std::strcspn(it->name, "@"));
    return {demangle(plain), plain};
  }

  // Source frames at vaddr, innermost first; the outer one is named by the
  // symbol table, as without DWARF ("" when neither knows it).
  const std::vector<SourceFrame>& frames_at(uint64_t vaddr) {
    auto [it, added] = frames.try_emplace(vaddr);
    std::vector<SourceFrame>& f = it->second;
    if (!added) return f;
    if (!dwarf_refused) f = source_frames(mod, vaddr + bias, dwarf_index);
    if (f.empty()) f.emplace_back();
    auto [name, system] = names_at(vaddr);
    if (!name.empty()) {
      f.back().function = std::move(name);
      f.back().system_name = std::move(system);
    } else if (std::vector<SourceFrame> own = runtime_frames_at(vaddr); !own.empty()) {
      f = std::move(own);  // the runtime's table has the inlined calls DWARF would have had
    }
    return f;
  }

  std::vector<SourceFrame> runtime_frames_at(uint64_t vaddr) {
    if (!runtime_read) {
      runtime_read = true;
      if (elf) runtime = read_runtime_tables(*readers, elf);
    }
    return runtime ? runtime->frames_at(vaddr) : std::vector<SourceFrame>();
  }

  std::string read_build_id() const {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr;
    int n = mod ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
    std::string hex;
    for (int i = 0; i < n; ++i) {
      char b[3];
      std::snprintf(b, sizeof b, "%02x", bits[i]);
      hex += b;
    }
    return hex;
  }
};

namespace {

std::string offset_name(const std::string& path, uint64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "+0x%llx", (unsigned long long)offset);
  std::string base = path.empty() ? "[anon]" : path.substr(path.rfind('/') + 1);
  return base + buf;
}

// A frame known by a name only (no symbol, no DWARF).
FrameInfo named(FrameInfo info, std::string name) {
  info.function = std::move(name);
  info.frames = {{info.function, "", "", 0}};
  return info;
}

}  // namespace

// The files allocscope maps itself are those its targets most often do (the
// C library, the loader): their paths are known even for a process gone
// before its maps could be read.
Symbolizer::Symbolizer(RuntimeTablesReaders runtime_tables) : runtime_tables_(std::move(runtime_tables)) {
  if (auto self = read_maps(getpid())) learn_paths(*self);
}
uint64_t Symbolizer::debug_files_refused() { return g_debug_refused; }
Symbolizer::~Symbolizer() = default;

Symbolizer::ModuleKey Symbolizer::key_of(const Mapping& m) {
  return {(uint64_t(m.dev_major) << 32) | m.dev_minor, m.inode};
}

void Symbolizer::track(pid_t pid) {
  if (processes_.contains(pid)) return;
  Process& p = processes_[pid];
  if (auto maps = read_maps(pid)) {
    p.maps = std::move(*maps);
    learn_paths(p.maps);
  }
}

// Remembers, per file, a path that opens it from here after the process is
// gone: the path the process used, when it names the same file for us.
void Symbolizer::learn_paths(const std::vector<Mapping>& maps) {
  for (const Mapping& m : maps) {
    if (!m.is_file() || m.deleted) continue;
    ModuleKey key = key_of(m);
    if (paths_.contains(key)) continue;
    struct stat st;
    if (stat(m.path.c_str(), &st) == 0 && st.st_ino == m.inode && major(st.st_dev) == m.dev_major &&
        minor(st.st_dev) == m.dev_minor)
      paths_.emplace(key, m.path);
  }
}

const Mapping* Symbolizer::mapping_for(pid_t pid, uint64_t ip, bool refresh) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return nullptr;
  const Mapping* m = find_mapping(it->second.maps, ip);
  if (!m && refresh) {  // mapped after the snapshot (dlopen, JIT)
    if (auto maps = read_maps(pid); maps && !maps->empty()) {
      learn_paths(*maps);
      it->second.maps = std::move(*maps);
      m = find_mapping(it->second.maps, ip);
    }
  }
  return m;
}

void Symbolizer::refresh(pid_t pid, std::span<const Mapping> seen) {
  Process& p = processes_[pid];
  auto maps = read_maps(pid);
  if (!maps || maps->empty()) return;
  learn_paths(*maps);
  bool current = std::all_of(seen.begin(), seen.end(), [&](const Mapping& k) {
    const Mapping* m = find_mapping(*maps, k.start);
    return m && m->start == k.start && m->inode == k.inode;
  });
  if (current) p.maps = std::move(*maps);
}

void Symbolizer::add_mappings(pid_t pid, std::span<const Mapping> kernel_maps) {
  std::vector<Mapping>& maps = processes_[pid].maps;
  auto in_snapshot = [&](const Mapping& k) {
    const Mapping* m = find_mapping(maps, k.start);
    return m && m->start == k.start && m->end == k.end && m->inode == k.inode && m->offset == k.offset;
  };
  bool changed = false, new_file = false;
  for (const Mapping& k : kernel_maps)
    if (!in_snapshot(k)) {
      changed = true;
      new_file |= k.inode && !paths_.contains(key_of(k));
    }
  if (!changed)  // the common case: one lookup per mapping
    return;
  if (new_file)  // a file not seen before: /proc tells its path while the process lives
    refresh(pid, kernel_maps);
  bool added = false;
  for (const Mapping& k : kernel_maps) {
    if (in_snapshot(k)) continue;
    // The kernel's view at sample time wins over a snapshot taken before the
    // range was unmapped and mapped again.
    std::erase_if(maps, [&](const Mapping& m) { return m.start < k.end && k.start < m.end; });
    Mapping m = k;
    if (auto p = paths_.find(key_of(m)); p != paths_.end()) m.path = p->second;
    maps.push_back(std::move(m));
    added = true;
  }
  if (added)
    std::sort(maps.begin(), maps.end(), [](const Mapping& a, const Mapping& b) { return a.start < b.start; });
}

std::vector<uint32_t> Symbolizer::compact(const std::vector<bool>& used) {
  std::vector<uint32_t> remap(mappings_.size(), kNoMapping);
  std::vector<Mapping> kept;
  for (uint32_t id = 0; id < mappings_.size(); ++id)
    if (id < used.size() && used[id]) {
      remap[id] = uint32_t(kept.size());
      kept.push_back(std::move(mappings_[id]));
    }
  mappings_ = std::move(kept);
  for (auto it = mapping_ids_.begin(); it != mapping_ids_.end();) {
    uint32_t to = remap[it->second];
    if (to == kNoMapping) {
      it = mapping_ids_.erase(it);
    } else {
      it->second = to;
      ++it;
    }
  }
  std::unordered_map<uint32_t, std::shared_ptr<PerfMap>> jit;
  for (auto& [id, map] : jit_)
    if (remap[id] != kNoMapping) jit.emplace(remap[id], std::move(map));
  jit_ = std::move(jit);
  std::set<ModuleKey> needed;
  for (const Mapping& m : mappings_)
    if (m.is_file()) needed.insert(key_of(m));
  for (const auto& [pid, process] : processes_)
    for (const Mapping& m : process.maps)
      if (m.is_file() && m.executable) needed.insert(key_of(m));  // code that may yet be sampled
  std::erase_if(modules_, [&](const auto& e) { return !needed.contains(e.first); });
  std::erase_if(paths_, [&](const auto& e) { return !needed.contains(e.first); });
  std::erase_if(file_bases_, [&](const auto& e) { return !needed.contains(e.first); });
  return remap;
}

void Symbolizer::forget(pid_t pid) {
  processes_.erase(pid);
  perf_maps_.erase(pid);
}

const std::vector<Mapping>& Symbolizer::maps(pid_t pid) {
  track(pid);
  return processes_[pid].maps;
}

// Opens the binary behind `m` once: through the live process when it can
// (exact even for deleted files and other mount namespaces), else by a path
// known to hold the same file.
void Symbolizer::open_module(pid_t pid, const Mapping& m) {
  ModuleKey key = key_of(m);
  if (modules_.contains(key)) return;
  std::string path = mapped_file_path(pid, m);
  auto fd = open_binary(path);
  if (!fd) {
    auto known = paths_.find(key);
    if (known == paths_.end()) return;  // gone, and nowhere else to be found: addresses stay as offsets
    path = known->second;
    FileIdentity mapped{m.dev_major, m.dev_minor, m.inode};
    fd = open_binary(path, &mapped);
    if (!fd) return;
  }
  modules_.emplace(key, std::make_unique<Module>(std::move(*fd), path, m.path, runtime_tables_));
}

uint32_t Symbolizer::intern(pid_t pid, const Mapping& m) {
  auto key = std::tuple{m.start, m.end, m.offset, m.inode, m.inode ? 0 : pid};
  auto [it, added] = mapping_ids_.try_emplace(key, uint32_t(mappings_.size()));
  if (added) mappings_.push_back(m);
  return it->second;
}

uint32_t Symbolizer::at_file_base(uint32_t id) {
  if (id >= mappings_.size() || !mappings_[id].is_file()) return id;
  Mapping m = mappings_[id];
  auto [base, made] = file_bases_.try_emplace(key_of(m), next_file_base_ << 36);
  // Below bit 62: never taken for a Python frame; 2^26 files before a wrap.
  if (made) next_file_base_ = next_file_base_ % (uint64_t{1} << 26) + 1;
  m.end = base->second + m.offset + (m.end - m.start);
  m.start = base->second + m.offset;
  return intern(0, m);
}

// Reads the process's perf map when first needed, and again when it grew
// (the JIT named more code since) and `addr` is not in it.
void Symbolizer::load_perf_map(pid_t pid, uint64_t addr) {
  std::shared_ptr<PerfMap>& map = perf_maps_[pid];
  if (!map) map = std::make_shared<PerfMap>();
  if (find_jit_symbol(map->symbols, addr)) return;
  // Written where the process sees /tmp (a container's, a chroot's), named
  // by its id in its own PID namespace.
  std::string proc = "/proc/" + std::to_string(pid);
  if (!map->own_pid) {  // read once: a miss of the map comes back here often
    pid_t own = namespaced_pid(read_text_file(proc + "/status").value_or(""));
    map->own_pid = own ? own : pid;
  }
  std::string path = "/tmp/perf-" + std::to_string(map->own_pid) + ".map";
  struct stat process;
  // /tmp is anyone's: only a map of the process's own user (or root's) names
  // its code, never through a symlink (nor out of its root), a FIFO or a
  // file without bound.
  if (stat(proc.c_str(), &process) != 0) return;
  auto file = read_file_owned_by(path, process.st_uid, kMaxPerfMapBytes, pid, map->size);
  if (!file) return;
  // Left over by an earlier process with this pid: it names other code.
  if (double started = process_start_time(pid); started > 0 && double(file->mtime) + 2 < started) return;
  map->symbols = parse_perf_map(file->text);
  map->size = file->size;
}

uint32_t Symbolizer::resolve_address(pid_t pid, uint64_t addr) {
  track(pid);
  const Mapping* m = mapping_for(pid, addr, true);
  if (!m) return kNoMapping;
  if (m->is_file()) open_module(pid, *m);
  uint32_t id = intern(pid, *m);
  if (!m->inode && m->executable) {  // JIT code, perhaps named in a perf map
    load_perf_map(pid, addr);
    jit_[id] = perf_maps_[pid];
  }
  return id;
}

std::vector<uint32_t> Symbolizer::resolve(pid_t pid, std::span<const uint64_t> ips) {
  std::vector<uint32_t> ids;
  ids.reserve(ips.size());
  for (uint64_t ip : ips)  // a return address: look up the call
    ids.push_back(is_runtime_frame(ip) ? kNoMapping : resolve_address(pid, ip - 1));
  return ids;
}

uint64_t Symbolizer::runtime_frame(std::string_view runtime, const std::string& function,
                                   const std::string& file, int64_t line) {
  auto key = std::tuple{std::string(runtime), function, file, line};
  if (auto it = runtime_ids_.find(key); it != runtime_ids_.end()) return it->second;
  if (runtime_frames_.size() >= kMaxRuntimeFrames) {  // one more: the frame that says so
    ++runtime_frames_full_;
    key = {std::string(runtime), "[" + std::string(runtime) + " frames beyond the table]", "", 0};
    if (auto it = runtime_ids_.find(key); it != runtime_ids_.end()) return it->second;
  }
  uint64_t ip = kRuntimeFrames + runtime_frames_.size();
  // No system name: no binary has a symbol for it, and pprof would
  // "demangle" one such as <module> or outer.<locals>.inner to nothing.
  runtime_frames_.push_back({{std::get<1>(key), "", std::get<2>(key), std::get<3>(key)}, std::get<0>(key)});
  runtime_ids_.emplace(std::move(key), ip);
  return ip;
}

FrameInfo Symbolizer::describe(uint32_t id, uint64_t ip) {
  FrameInfo info;
  if (is_runtime_frame(ip)) {
    size_t at = ip - kRuntimeFrames;
    if (at < runtime_frames_.size()) {
      info.frames.push_back(runtime_frames_[at].frame);
      info.function = runtime_frames_[at].frame.function;
      info.runtime = runtime_frames_[at].runtime;
      return info;
    }
    return named(std::move(info), "[unknown]");
  }
  uint64_t addr = ip - 1;  // every frame is a return address: look up the call
  info.mapping = mapping(id);
  if (!info.mapping) return named(std::move(info), "[unknown]");
  const Mapping& m = *info.mapping;
  if (auto jit = jit_.find(id); jit != jit_.end())
    if (const JitSymbol* sym = find_jit_symbol(jit->second->symbols, addr))
      return named(std::move(info), sym->name);
  auto mod = modules_.find(key_of(m));
  uint64_t vaddr;
  if (mod == modules_.end() || !mod->second->offset_to_vaddr(m.file_offset(addr), &vaddr))
    return named(std::move(info), offset_name(m.path, m.file_offset(addr)));
  info.build_id = mod->second->build_id;
  info.frames = mod->second->frames_at(vaddr);
  SourceFrame& outer = info.frames.back();
  if (outer.function.empty()) {  // no name: a signal's trampoline, or an offset
    const Module& found = *mod->second;
    if (is_signal_trampoline(found.mod, found.elf, vaddr + found.bias, m.file_offset(addr)))
      outer.function = outer.system_name = kSignalFrame;
    else
      outer.function = offset_name(m.path, vaddr);
  }
  info.function = outer.function;
  info.system_name = outer.system_name;
  return info;
}

}  // namespace allocscope
