#include "symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <utility>

#include "process.h"

namespace allocscope {

std::string demangle(const std::string& name) {
  if (!name.starts_with("_Z"))
    return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out)
    return name;
  std::string result(out);
  std::free(out);
  return result;
}

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

  Module(const std::string& open_path, const std::string& shown_path) {
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    basename = shown_path.substr(shown_path.rfind('/') + 1);
    dwfl = dwfl_begin(&callbacks);
    if (!dwfl)
      return;
    mod = dwfl_report_elf(dwfl, basename.c_str(), open_path.c_str(), -1, 0, false);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod)
      elf = dwfl_module_getelf(mod, &bias);
    build_id = read_build_id();
  }
  ~Module() {
    if (dwfl)
      dwfl_end(dwfl);
  }

  // ELF virtual address of a file offset, through the loadable segments.
  bool offset_to_vaddr(uint64_t offset, uint64_t* vaddr) const {
    size_t n = 0;
    if (!elf || elf_getphdrnum(elf, &n) != 0)
      return false;
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

  // {demangled, system} names of the function at vaddr; empty when unknown.
  std::pair<std::string, std::string> names_at(uint64_t vaddr) const {
    if (mod) {
      GElf_Off off;
      GElf_Sym sym;
      const char* name = dwfl_module_addrinfo(mod, vaddr + bias, &off, &sym, nullptr, nullptr, nullptr);
      if (name) {
        // Versioned .dynsym names ("__libc_start_main@@GLIBC_2.34") print
        // without their version.
        std::string plain(name, std::strcspn(name, "@"));
        return {demangle(plain), plain};
      }
    }
    return {};
  }

  // Source frames at vaddr, innermost first; the outer one is named by the
  // symbol table, as without DWARF ("" when neither knows it).
  const std::vector<SourceFrame>& frames_at(uint64_t vaddr) {
    auto [it, added] = frames.try_emplace(vaddr);
    std::vector<SourceFrame>& f = it->second;
    if (!added)
      return f;
    f = source_frames(mod, vaddr + bias);
    if (f.empty())
      f.emplace_back();
    auto [name, system] = names_at(vaddr);
    if (!name.empty()) {
      f.back().function = std::move(name);
      f.back().system_name = std::move(system);
    }
    return f;
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

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Symbolizer::ModuleKey Symbolizer::key_of(const Mapping& m) {
  return {(uint64_t(m.dev_major) << 32) | m.dev_minor, m.inode};
}

void Symbolizer::track(pid_t pid) {
  if (processes_.contains(pid))
    return;
  Process p;
  p.comm = read_comm(pid);
  if (auto maps = read_maps(pid))
    p.maps = std::move(*maps);
  processes_.emplace(pid, std::move(p));
}

const Mapping* Symbolizer::mapping_for(pid_t pid, uint64_t ip, bool refresh) {
  auto it = processes_.find(pid);
  if (it == processes_.end())
    return nullptr;
  const Mapping* m = find_mapping(it->second.maps, ip);
  if (!m && refresh) {  // mapped after the snapshot (dlopen, JIT)
    if (auto maps = read_maps(pid); maps && !maps->empty()) {
      it->second.maps = std::move(*maps);
      m = find_mapping(it->second.maps, ip);
    }
  }
  return m;
}

void Symbolizer::refresh(pid_t pid) {
  track(pid);
  if (auto maps = read_maps(pid); maps && !maps->empty())
    processes_[pid].maps = std::move(*maps);
}

const std::vector<Mapping>& Symbolizer::maps(pid_t pid) {
  track(pid);
  return processes_[pid].maps;
}

void Symbolizer::prepare(pid_t pid, std::span<const uint64_t> ips) {
  track(pid);
  for (uint64_t ip : ips) {
    const Mapping* m = mapping_for(pid, ip - 1, true);
    if (!m || !m->is_file())
      continue;
    ModuleKey key = key_of(*m);
    if (modules_.contains(key))
      continue;
    // The process may be gone already (short-lived ones often are): then the
    // file as this namespace sees it is the best guess left.
    std::string path = mapped_file_path(pid, *m);
    if (access(path.c_str(), R_OK) != 0)
      path = m->path;
    modules_.emplace(key, std::make_unique<Module>(path, m->path));
  }
}

std::string Symbolizer::comm(pid_t pid) const {
  auto it = processes_.find(pid);
  return it != processes_.end() ? it->second.comm : "";
}

FrameInfo Symbolizer::describe(pid_t pid, uint64_t ip) {
  FrameInfo info;
  uint64_t addr = ip - 1;  // every frame is a return address: look up the call
  info.mapping = mapping_for(pid, addr, false);
  if (!info.mapping)
    return named(std::move(info), "[unknown]");
  const Mapping& m = *info.mapping;
  auto mod = modules_.find(key_of(m));
  uint64_t vaddr;
  if (mod == modules_.end() || !mod->second->offset_to_vaddr(m.file_offset(addr), &vaddr))
    return named(std::move(info), offset_name(m.path, m.file_offset(addr)));
  info.build_id = mod->second->build_id;
  info.frames = mod->second->frames_at(vaddr);
  SourceFrame& outer = info.frames.back();
  if (outer.function.empty())
    outer.function = offset_name(m.path, vaddr);
  info.function = outer.function;
  info.system_name = outer.system_name;
  return info;
}

std::string Symbolizer::frame_name(pid_t pid, uint64_t ip) { return describe(pid, ip).function; }

}  // namespace allocscope
