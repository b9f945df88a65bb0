#include "inject/target_code.h"

#include <elf.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "host/preload_library.h"
#include "host/process.h"
#include "host/process_memory.h"
#include "probe/placement/code_reading.h"
#include "symbols/elf_file.h"

namespace allocscope::inject {
namespace {

// glibc's __restore_rt: mov $15,%rax; syscall. musl's: mov $15,%eax; syscall.
constexpr uint8_t kRestorerGlibc[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
constexpr uint8_t kRestorerShort[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
constexpr uint8_t kSyscallRet[] = {0x0f, 0x05, 0xc3};
constexpr uint64_t kMaxCodeRead = 64ull << 20;

std::string_view base_name(std::string_view path) { return path.substr(path.rfind('/') + 1); }

bool is_loader_name(std::string_view path) {
  auto base = base_name(path);
  return base.starts_with("ld-linux") || base.starts_with("ld-musl") || base.starts_with("ld.so");
}

// The first address in the executable mappings of `path` holding one of the patterns.
std::optional<uint64_t> find_in_code(pid_t pid, const std::vector<Mapping>& maps, const std::string& path,
                                     std::initializer_list<std::span<const uint8_t>> patterns) {
  for (const Mapping& m : maps) {
    if (!m.executable || m.path != path || m.end - m.start > kMaxCodeRead) continue;
    std::vector<uint8_t> code(m.end - m.start);
    if (!read_process_memory(pid, m.start, code)) continue;
    for (auto pattern : patterns)
      if (auto at = find_bytes(code, pattern)) return m.start + *at;
  }
  return std::nullopt;
}

// A symbol's run-time address: the executable mapping of `path` that holds
// its file offset.
std::optional<uint64_t> run_address(const ElfFile& elf, const std::vector<Mapping>& maps,
                                    const std::string& path, uint64_t vaddr) {
  auto offset = elf.vaddr_to_offset(vaddr);
  if (!offset) return std::nullopt;
  for (const Mapping& m : maps)
    if (m.path == path && m.executable && *offset >= m.offset && *offset < m.offset + (m.end - m.start))
      return m.start + (*offset - m.offset);
  return std::nullopt;
}

// __errno_location returns the thread pointer plus what its first
// rip-relative read loads: the GOT slot the loader filled with errno's
// offset (R_X86_64_TPOFF64).
int64_t errno_offset(pid_t pid, uint64_t errno_location) {
  std::vector<uint8_t> code(32);
  if (!errno_location || !read_process_memory(pid, errno_location, code)) return 0;
  std::vector<uint64_t> slots = rip_targets(code, errno_location);
  int64_t offset = 0;
  if (slots.empty() || !read_process_memory(pid, slots.front(), {reinterpret_cast<uint8_t*>(&offset), 8}))
    return 0;
  return offset < 0 ? offset : 0;  // static TLS lies below the thread pointer
}

uint64_t number_field(std::string_view status, std::string_view key) {
  size_t at = status.find(key);
  if (at == std::string_view::npos) return 0;
  auto v = status.substr(at + key.size());
  v.remove_prefix(std::min(v.find_first_not_of(" \t"), v.size()));
  uint64_t out = 0;
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

std::string_view line_of(std::string_view status, std::string_view key) {
  size_t at = status.find(key);
  if (at == std::string_view::npos) return {};
  auto rest = status.substr(at + key.size());
  return rest.substr(0, rest.find('\n'));
}

}  // namespace

std::optional<size_t> find_bytes(std::span<const uint8_t> hay, std::span<const uint8_t> needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  if (it == hay.end() || needle.empty()) return std::nullopt;
  return static_cast<size_t>(it - hay.begin());
}

bool is_allocator_library_name(std::string_view path) {
  auto base = base_name(path);
  return base.starts_with("libjemalloc") || base.starts_with("libtcmalloc") ||
         base.starts_with("libmimalloc") || is_allocscope_library(path);
}

Result<TargetCode> find_target_code(pid_t pid) {
  auto maps = read_maps(pid);
  if (!maps) return fail(maps.error());
  TargetCode t;
  t.maps = std::move(*maps);
  const Mapping* libc = find_c_library(t.maps);
  bool loader =
      std::any_of(t.maps.begin(), t.maps.end(), [](const Mapping& m) { return is_loader_name(m.path); });
  if (!libc || !loader) return fail("a static program: no dynamic loader to load the library with");
  if (base_name(libc->path).find("musl") != std::string_view::npos)
    return fail("musl's C library: allocscope's library is built for glibc's");
  auto elf = ElfFile::open(mapped_file_path(pid, *libc));
  if (!elf) return fail(elf.error());
  uint64_t errno_location = 0;
  for (const ElfSymbol& s : elf->functions()) {
    if (s.name == "dlopen") t.dlopen = run_address(*elf, t.maps, libc->path, s.vaddr).value_or(0);
    if (s.name == "__errno_location")
      errno_location = run_address(*elf, t.maps, libc->path, s.vaddr).value_or(0);
  }
  t.errno_tpoff = errno_offset(pid, errno_location);
  if (!t.dlopen)
    return fail("its C library (" + libc->path + ") has no dlopen: glibc 2.34 or newer is needed");
  auto restorer = find_in_code(pid, t.maps, libc->path, {kRestorerGlibc, kRestorerShort});
  auto syscall_ret = find_in_code(pid, t.maps, libc->path, {kSyscallRet});
  if (!restorer || !syscall_ret) return fail("no sigreturn trampoline found in " + libc->path);
  t.gadgets = {*restorer, *syscall_ret};
  for (const Mapping& m : t.maps)
    if (m.executable && (m.path == libc->path || is_loader_name(m.path) || is_allocator_library_name(m.path)))
      t.no_calls_from.emplace_back(m.start, m.end);
  return t;
}

ProcessFacts facts_from(std::string_view status, std::span<const uint8_t> auxv) {
  ProcessFacts f;
  f.seccomp = static_cast<int>(number_field(status, "\nSeccomp:"));
  f.tracer = static_cast<pid_t>(number_field(status, "\nTracerPid:"));
  f.shadow_stack = line_of(status, "\nx86_Thread_features:").find("shstk") != std::string_view::npos;
  for (size_t at = 0; at + 16 <= auxv.size(); at += 16) {
    uint64_t type, value;
    std::memcpy(&type, auxv.data() + at, 8);
    std::memcpy(&value, auxv.data() + at + 8, 8);
    if (type == AT_SECURE) f.secure_exec = value != 0;
    if (type == AT_NULL) break;
  }
  return f;
}

std::optional<std::string> refusal(const ProcessFacts& f) {
  if (f.secure_exec) return "a set-id program (secure execution): no library is loaded into it";
  if (f.shadow_stack) return "it runs with a shadow stack (CET)";
  if (f.tracer) return "already traced by process " + std::to_string(f.tracer);
  if (f.seccomp == 1) return "strict seccomp mode: only read, write and exit";
  return std::nullopt;
}

Result<ProcessFacts> read_facts(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  auto status = read_text_file(base + "/status");
  if (!status) return fail(status.error());
  auto auxv = read_text_file(base + "/auxv");
  std::string_view a = auxv ? std::string_view(*auxv) : std::string_view();
  return facts_from(*status, std::span(reinterpret_cast<const uint8_t*>(a.data()), a.size()));
}

}  // namespace allocscope::inject
