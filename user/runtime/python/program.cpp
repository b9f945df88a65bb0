#include "runtime/python/program.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/python/layouts.h"

namespace allocscope {
namespace {

std::optional<ElfSymbol> find(const std::vector<ElfSymbol>& symbols, const char* name) {
  for (const ElfSymbol& s : symbols)
    if (s.name == name) return s;
  return std::nullopt;
}

// Bytes of the file at a virtual address (initialized data).
Result<std::vector<uint8_t>> read_at(const ElfFile& elf, uint64_t vaddr, size_t n) {
  auto offset = elf.vaddr_to_offset(vaddr);
  if (!offset) return fail(offset.error());
  auto bytes = elf.read(*offset, n);
  if (bytes && bytes->size() < n) return fail("read " + elf.path() + ": short read", EIO);
  return bytes;
}

uint64_t word(const std::vector<uint8_t>& bytes, size_t at) {
  uint64_t v = 0;
  if (at + 8 <= bytes.size()) std::memcpy(&v, bytes.data() + at, 8);
  return v;
}

constexpr size_t kFreeThreaded = 16;  // _Py_DebugOffsets.free_threaded, in every version

// Where each version's _Py_DebugOffsets (at the start of _PyRuntime) keeps
// the fields the walk reads: u64 offsets after the cookie, by position in
// the struct of its Include/internal/pycore_debug_offsets.h
// (pycore_runtime.h in 3.13). Each version adds fields, so they move.
struct DebugPositions {
  int minor;
  size_t interpreters_head, threads_head;
  size_t tstate_next, tstate_frame, tstate_thread;
  size_t frame_previous, frame_executable, frame_instr, frame_owner;
  size_t code_filename, code_qualname, code_linetable, code_first_line, code_adaptive;
  size_t ob_type, bytes_size, bytes_data;
  size_t unicode_state, unicode_length, ascii_size;
  size_t compact_size;  // 0: not published (PyASCIIObject's size + 16)
  size_t end;           // the struct's size
};

constexpr DebugPositions kDebugPositions[] = {
    {13,  40,  72,  168, 184, 192, 232, 240, 248, 264, 280, 296,
     304, 312, 344, 360, 520, 528, 544, 552, 560, 0,   584},
    {14,  40,  72,  192, 208, 216, 256, 264, 272, 288, 320, 336,
     344, 352, 384, 408, 600, 608, 624, 632, 640, 0,   760},
    {15,  40,  72,  192, 208, 240, 320, 328, 336, 352, 384, 400,
     408, 416, 448, 472, 696, 704, 720, 728, 736, 744, 888},
};

const DebugPositions* debug_positions(int major, int minor) {
  for (const DebugPositions& d : kDebugPositions)
    if (major == 3 && d.minor == minor) return &d;
  return nullptr;
}

Result<PythonProgram> published_layout(const std::vector<uint8_t>& d, const DebugPositions& at) {
  if (std::memcmp(d.data(), "xdebugpy", 8) != 0) return fail("no _Py_DebugOffsets", ENOTSUP);
  PythonProgram p;
  as_py_layout& k = p.kernel;
  k.holder = AS_PY_ABSENT;
  k.interp_head = uint32_t(word(d, at.interpreters_head));
  k.threads_head = uint16_t(word(d, at.threads_head));
  k.tstate_next = uint16_t(word(d, at.tstate_next));
  k.tstate_thread = uint16_t(word(d, at.tstate_thread));
  k.tstate_frame = uint16_t(word(d, at.tstate_frame));
  k.cframe_frame = AS_PY_ABSENT;
  k.frame_code = uint16_t(word(d, at.frame_executable));
  k.frame_previous = uint16_t(word(d, at.frame_previous));
  k.frame_instr = uint16_t(word(d, at.frame_instr));
  k.frame_owner = uint16_t(word(d, at.frame_owner));
  k.frame_entry = AS_PY_ABSENT;
  k.code_first_line = uint16_t(word(d, at.code_first_line));
  k.code_units = uint16_t(word(d, at.code_adaptive));
  // FRAME_OWNED_BY_CSTACK (3.13), FRAME_OWNED_BY_INTERPRETER (3.14 on):
  // that owner and those above are no function's frames.
  k.owner_cstack = 3;
  PythonObjectLayout& o = p.objects;
  o.code_filename = uint32_t(word(d, at.code_filename));
  o.code_qualname = uint32_t(word(d, at.code_qualname));
  o.code_linetable = uint32_t(word(d, at.code_linetable));
  o.code_first_line = k.code_first_line;
  o.code_units = k.code_units;
  o.ob_type = uint32_t(word(d, at.ob_type));
  o.bytes_size = uint32_t(word(d, at.bytes_size));
  o.bytes_data = uint32_t(word(d, at.bytes_data));
  o.unicode_state = uint32_t(word(d, at.unicode_state));
  o.unicode_length = uint32_t(word(d, at.unicode_length));
  o.ascii_size = uint32_t(word(d, at.ascii_size));
  // utf8_length and utf8 follow (3.12 on), unless the version says
  o.compact_size = at.compact_size ? uint32_t(word(d, at.compact_size)) : o.ascii_size + 16;
  return p;
}

// The bytes at the start of a frame that hold the fields the walk reads.
uint32_t frame_extent(const as_py_layout& k) {
  auto past = [](uint16_t off, uint32_t size) { return off == AS_PY_ABSENT ? 0u : uint32_t(off) + size; };
  return std::max({past(k.frame_code, 8), past(k.frame_previous, 8), past(k.frame_instr, 8),
                   past(k.frame_owner, 1), past(k.frame_entry, 1)});
}

// The version of a runtime without Py_Version (before 3.11), by the first
// function of the C API each version added.
std::pair<int, int> version_by_api(const ElfFile& elf) {
  std::vector<ElfSymbol> functions = elf.functions();
  if (find(functions, "Py_IsNone")) return {3, 10};
  if (find(functions, "PyFrame_GetCode")) return {3, 9};
  if (find(functions, "PyCode_NewWithPosOnlyArgs")) return {3, 8};
  return {3, 7};  // _PyRuntime came with 3.7
}

std::string version_text(int major, int minor) { return std::to_string(major) + "." + std::to_string(minor); }

}  // namespace

Result<PythonProgram> read_python_program(const ElfFile& elf) {
  std::vector<ElfSymbol> objects = elf.objects();
  auto runtime = find(objects, "_PyRuntime"), version = find(objects, "Py_Version");
  auto code_type = find(objects, "PyCode_Type");
  if (!runtime || !code_type) return fail(elf.path() + ": no CPython runtime", Cause::NoPythonRuntime);
  int major = 0, minor = 0;
  if (version) {
    auto hex = read_at(elf, version->vaddr, 4);
    if (!hex) return fail(hex.error());
    uint32_t v = 0;
    std::memcpy(&v, hex->data(), 4);
    major = int(v >> 24);
    minor = int((v >> 16) & 0xff);
  } else {
    std::tie(major, minor) = version_by_api(elf);
  }
  std::string name = version_text(major, minor);
  auto eval = find(elf.functions(), "_PyEval_EvalFrameDefault");
  auto exec = elf.exec_vaddr();
  auto exec_offset = exec ? elf.vaddr_to_offset(*exec) : fail("no executable segment");
  if (!eval || !exec || !exec_offset)
    return fail(name + ": no symbol of its evaluation loop (_PyEval_EvalFrameDefault)", ENOTSUP);
  Result<PythonProgram> p = fail(name + ": allocscope walks the frames of CPython 3.8 to 3.15", ENOTSUP);
  if (auto table = python_table_layout(major, minor)) {
    p = std::move(*table);
  } else if (const DebugPositions* at = debug_positions(major, minor)) {
    auto offsets = read_at(elf, runtime->vaddr, at->end);
    if (!offsets) return fail(offsets.error());
    if (word(*offsets, kFreeThreaded))  // named as its program is: python3.13t
      return fail(name + "t: a free-threaded build, whose frames allocscope does not walk yet", ENOTSUP);
    p = published_layout(*offsets, *at);
    if (!p) return fail(name + ": " + p.error().message, ENOTSUP);
  }
  if (!p) return p;
  p->major = major;
  p->minor = minor;
  p->kernel.runtime = runtime->vaddr;
  p->kernel.exec_vaddr = *exec;
  p->kernel.exec_offset = *exec_offset;
  p->kernel.code_filename = uint16_t(p->objects.code_filename);
  uint32_t extent = frame_extent(p->kernel);
  if (extent > AS_PY_FRAME_BYTES)
    return fail(name + ": frame fields beyond the bytes the kernel reads", ENOTSUP);
  p->kernel.frame_bytes = uint8_t(extent);
  p->eval_start = eval->vaddr;
  p->eval_end = eval->vaddr + eval->size;
  p->code_type = code_type->vaddr;
  return p;
}

}  // namespace allocscope
