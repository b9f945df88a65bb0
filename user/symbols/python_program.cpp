#include "symbols/python_program.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

namespace allocscope {
namespace {

constexpr uint8_t kNoOwner = 0xff;

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

// 3.13's _Py_DebugOffsets: the u64 fields after the cookie, by position
// (Include/internal/pycore_runtime.h of 3.13).
enum DebugField : size_t {
  kVersion = 8,
  kFreeThreaded = 16,
  kInterpretersHead = 40,
  kThreadsHead = 72,
  kTstateNext = 168,
  kTstateCurrentFrame = 184,
  kTstateThreadId = 192,
  kFramePrevious = 232,
  kFrameExecutable = 240,
  kFrameInstrPtr = 248,
  kFrameOwner = 264,
  kCodeFilename = 280,
  kCodeQualname = 296,
  kCodeLinetable = 304,
  kCodeFirstLine = 312,
  kCodeAdaptive = 344,
  kObType = 360,
  kBytesSize = 520,
  kBytesData = 528,
  kUnicodeState = 544,
  kUnicodeLength = 552,
  kAsciiSize = 560,
  kDebugOffsetsEnd = 584,
};

Result<PythonProgram> python_313_layout(const std::vector<uint8_t>& d) {
  if (std::memcmp(d.data(), "xdebugpy", 8) != 0) return fail("no _Py_DebugOffsets", ENOTSUP);
  if (word(d, kFreeThreaded)) return fail("a free-threaded build (its frames are not walked)", ENOTSUP);
  PythonProgram p;
  as_py_layout& k = p.kernel;
  k.holder = AS_PY_ABSENT;
  k.interp_head = uint32_t(word(d, kInterpretersHead));
  k.threads_head = uint16_t(word(d, kThreadsHead));
  k.tstate_next = uint16_t(word(d, kTstateNext));
  k.tstate_thread = uint16_t(word(d, kTstateThreadId));
  k.tstate_frame = uint16_t(word(d, kTstateCurrentFrame));
  k.cframe_frame = AS_PY_ABSENT;
  k.frame_code = uint16_t(word(d, kFrameExecutable));
  k.frame_previous = uint16_t(word(d, kFramePrevious));
  k.frame_instr = uint16_t(word(d, kFrameInstrPtr));
  k.frame_owner = uint16_t(word(d, kFrameOwner));
  k.frame_entry = AS_PY_ABSENT;
  k.code_first_line = uint16_t(word(d, kCodeFirstLine));
  k.code_units = uint16_t(word(d, kCodeAdaptive));
  k.owner_cstack = 3;  // FRAME_OWNED_BY_CSTACK
  PythonObjectLayout& o = p.objects;
  o.code_filename = uint32_t(word(d, kCodeFilename));
  o.code_qualname = uint32_t(word(d, kCodeQualname));
  o.code_linetable = uint32_t(word(d, kCodeLinetable));
  o.code_first_line = k.code_first_line;
  o.code_units = k.code_units;
  o.ob_type = uint32_t(word(d, kObType));
  o.bytes_size = uint32_t(word(d, kBytesSize));
  o.bytes_data = uint32_t(word(d, kBytesData));
  o.unicode_state = uint32_t(word(d, kUnicodeState));
  o.unicode_length = uint32_t(word(d, kUnicodeLength));
  o.ascii_size = uint32_t(word(d, kAsciiSize));
  o.compact_size = o.ascii_size + 16;  // utf8_length, utf8 (3.12 on)
  return p;
}

// The bytes at the start of a frame that hold the fields the walk reads.
uint32_t frame_extent(const as_py_layout& k) {
  uint32_t last = std::max({uint32_t(k.frame_code), uint32_t(k.frame_previous), uint32_t(k.frame_instr)}) + 8;
  return std::max(
      {last, uint32_t(k.frame_owner) + 1, k.frame_entry == AS_PY_ABSENT ? 0u : uint32_t(k.frame_entry) + 1});
}

}  // namespace

PythonProgram python_311_layout() {
  PythonProgram p;
  p.major = 3;
  p.minor = 11;
  as_py_layout& k = p.kernel;
  k.holder = 576;  // gilstate.tstate_current
  k.interp_head = 40;
  k.threads_head = 16;
  k.tstate_next = 8;
  k.tstate_thread = 152;
  k.tstate_frame = 56;  // cframe
  k.cframe_frame = 8;   // current_frame
  k.frame_code = 32;
  k.frame_previous = 48;
  k.frame_instr = 56;  // prev_instr
  k.frame_owner = 69;
  k.frame_entry = 68;  // is_entry
  k.code_first_line = 72;
  k.code_units = 184;
  k.owner_cstack = kNoOwner;
  PythonObjectLayout& o = p.objects;
  o.code_filename = 112;
  o.code_qualname = 128;
  o.code_linetable = 136;
  o.code_first_line = 72;
  o.code_first_traceable = 168;
  o.code_units = 184;
  o.ascii_size = 48;
  o.compact_size = 72;
  return p;
}

Result<PythonProgram> read_python_program(const ElfFile& elf) {
  std::vector<ElfSymbol> objects = elf.objects();
  auto runtime = find(objects, "_PyRuntime"), version = find(objects, "Py_Version");
  auto code_type = find(objects, "PyCode_Type");
  if (!runtime || !version || !code_type)
    return fail(elf.path() + ": not a CPython 3.11+ interpreter", ENOENT);
  auto eval = find(elf.functions(), "_PyEval_EvalFrameDefault");
  auto hex = read_at(elf, version->vaddr, 4);
  auto exec = elf.exec_vaddr();
  if (!eval || !hex || !exec)
    return fail(elf.path() + ": CPython without its evaluation loop's symbol", ENOTSUP);
  uint32_t v = 0;
  std::memcpy(&v, hex->data(), 4);
  int major = int(v >> 24), minor = int((v >> 16) & 0xff);
  Result<PythonProgram> p =
      fail(elf.path() + ": CPython " + std::to_string(major) + "." + std::to_string(minor) +
               " (allocscope walks the frames of 3.11 and 3.13)",
           ENOTSUP);
  if (major == 3 && minor == 11) {
    p = python_311_layout();
  } else if (major == 3 && minor == 13) {
    auto offsets = read_at(elf, runtime->vaddr, kDebugOffsetsEnd);
    if (!offsets) return fail(offsets.error());
    p = python_313_layout(*offsets);
    if (!p) return fail(elf.path() + ": CPython 3.13, " + p.error().message, ENOTSUP);
  }
  if (!p) return p;
  p->major = major;
  p->minor = minor;
  p->kernel.runtime = runtime->vaddr;
  p->kernel.exec_vaddr = *exec;
  uint32_t extent = frame_extent(p->kernel);
  if (extent > AS_PY_FRAME_BYTES)
    return fail(elf.path() + ": CPython frame fields beyond the bytes read", ENOTSUP);
  p->kernel.frame_bytes = uint8_t(extent);
  p->eval_start = eval->vaddr;
  p->eval_end = eval->vaddr + eval->size;
  p->code_type = code_type->vaddr;
  return p;
}

}  // namespace allocscope
