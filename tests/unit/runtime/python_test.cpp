// CPython 3.11's layout against Debian's headers, the location table
// against CPython's own reading of it, a code object read from a live
// interpreter, and the placement of Python frames in a native stack.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "host/process_memory.h"
#include "pyenv_interpreters.h"
#include "python_offsets.h"
#include "runtime/python/code.h"
#include "runtime/python/layouts.h"
#include "runtime/python/placement.h"
#include "runtime/python/program.h"

namespace allocscope {
namespace {

constexpr const char* kPython311 = "/usr/bin/python3.11";

// The offsets each version's headers give, for the versions built here.
std::vector<struct python_offsets> headers_offsets() {
  std::vector<struct python_offsets> out = {python311_offsets()};
#ifdef HAVE_PYTHON38_OFFSETS
  out.push_back(python38_offsets());
#endif
#ifdef HAVE_PYTHON39_OFFSETS
  out.push_back(python39_offsets());
#endif
#ifdef HAVE_PYTHON310_OFFSETS
  out.push_back(python310_offsets());
#endif
#ifdef HAVE_PYTHON312_OFFSETS
  out.push_back(python312_offsets());
#endif
  return out;
}

// An offset of the table as the headers' convention has it (PY_ABSENT).
size_t kernel_field(uint32_t v) { return v == AS_PY_ABSENT ? PY_ABSENT : v; }
size_t object_field(uint32_t v) { return v == 0 ? PY_ABSENT : v; }

TEST(PythonLayout, EachTableIsItsVersionsHeaders) {
  std::string versions;
  for (const struct python_offsets& h : headers_offsets()) {
    versions += " 3." + std::to_string(h.minor);
    SCOPED_TRACE("3." + std::to_string(h.minor));
    auto table = python_table_layout(3, int(h.minor));
    ASSERT_TRUE(table);
    const as_py_layout& k = table->kernel;
    EXPECT_EQ(kernel_field(k.holder), h.holder);
    EXPECT_EQ(k.interp_head, h.interp_head);
    EXPECT_EQ(k.threads_head, h.threads_head);
    EXPECT_EQ(k.tstate_next, h.tstate_next);
    EXPECT_EQ(k.tstate_thread, h.tstate_thread);
    EXPECT_EQ(k.tstate_frame, h.tstate_frame);
    EXPECT_EQ(kernel_field(k.cframe_frame), h.cframe_frame);
    EXPECT_EQ(k.frame_code, h.frame_code);
    EXPECT_EQ(k.frame_previous, h.frame_previous);
    EXPECT_EQ(k.frame_instr, h.frame_instr);
    EXPECT_EQ(kernel_field(k.frame_owner), h.frame_owner);
    EXPECT_EQ(kernel_field(k.frame_entry), h.frame_entry);
    EXPECT_EQ(k.code_first_line, h.code_first_line);
    EXPECT_EQ(kernel_field(k.code_units), h.code_units);
    EXPECT_EQ(k.frame_per_call, h.minor <= 10);
    const PythonObjectLayout& o = table->objects;
    EXPECT_EQ(o.code_filename, h.code_filename);
    EXPECT_EQ(o.code_qualname, h.code_qualname);
    EXPECT_EQ(o.code_linetable, h.code_linetable);
    EXPECT_EQ(o.code_first_line, h.code_first_line);
    EXPECT_EQ(object_field(o.code_first_traceable), h.code_first_traceable);
    EXPECT_EQ(object_field(o.code_units), h.code_units);
    EXPECT_EQ(o.ob_type, h.ob_type);
    EXPECT_EQ(o.unicode_length, h.unicode_length);
    EXPECT_EQ(o.unicode_state, h.unicode_state);
    EXPECT_EQ(o.ascii_size, h.ascii_size);
    EXPECT_EQ(o.compact_size, h.compact_size);
    EXPECT_EQ(o.bytes_size, h.bytes_size);
    EXPECT_EQ(o.bytes_data, h.bytes_data);
  }
  std::cerr << "[ headers  ]" << versions << "\n";
}

// Each pyenv interpreter's runtime library is read as its version.
TEST(PythonProgram, ReadsEveryPyenvRuntime) {
  auto found = test::pyenv_interpreters(7, 13);
  if (found.empty()) GTEST_SKIP() << "no pyenv interpreter here";
  for (const test::PyenvInterpreter& i : found) {
    std::string dir = i.path.substr(0, i.path.rfind("/bin/"));
    std::string lib =
        dir + "/lib/libpython3." + std::to_string(i.minor) + (i.minor == 7 ? "m" : "") + ".so.1.0";
    SCOPED_TRACE(lib);
    auto elf = ElfFile::open(lib);
    ASSERT_TRUE(elf) << elf.error().message;
    auto p = read_python_program(*elf);
    if (i.minor < 8) {
      ASSERT_FALSE(p);
      EXPECT_EQ(p.error().code, ENOTSUP);
      EXPECT_EQ(p.error().message.rfind("3.7: ", 0), 0u) << p.error().message;
      continue;
    }
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->version(), "3." + std::to_string(i.minor));
    EXPECT_LE(p->kernel.frame_bytes, AS_PY_FRAME_BYTES);
    EXPECT_NE(p->kernel.code_filename, 0u);  // the kernel stamps frames with it
    EXPECT_EQ(p->kernel.code_filename, p->objects.code_filename);
    auto exec = elf->exec_vaddr();
    ASSERT_TRUE(exec);
    EXPECT_EQ(elf->vaddr_to_offset(*exec).value_or(1), p->kernel.exec_offset);
  }
}

TEST(PythonProgram, ReadsDebiansInterpreter) {
  auto elf = ElfFile::open(kPython311);
  ASSERT_TRUE(elf) << elf.error().message;
  auto p = read_python_program(*elf);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->version(), "3.11");
  EXPECT_NE(p->kernel.runtime, 0u);
  EXPECT_LT(p->eval_start, p->eval_end);
  EXPECT_NE(p->code_type, 0u);
  EXPECT_EQ(p->kernel.frame_bytes, 70);  // owner, at 69, is the last field read
}

TEST(PythonProgram, SaysAProgramIsNotCPython) {
  auto elf = ElfFile::open("/bin/true");
  ASSERT_TRUE(elf);
  auto p = read_python_program(*elf);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().cause, Cause::NoPythonRuntime);
}

// Output of a command, all of it.
std::string output_of(const std::string& command) {
  std::string out;
  FILE* f = popen(command.c_str(), "r");
  if (!f) return out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  pclose(f);
  return out;
}

// Every code object of a few large modules of the standard library: its
// first line, its table, and CPython's own lines for it, as ranges of
// bytes (co_lines from 3.10; before, dis.findlinestarts).
constexpr const char* kDumpLines = R"(
import argparse, asyncio.base_events, collections, dis, email.message, json.decoder, typing, difflib
def walk(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            yield from walk(c)
def lines(code):
    if hasattr(code, "co_lines"):
        return list(code.co_lines())
    starts = list(dis.findlinestarts(code)) + [(len(code.co_code), 0)]
    return [(s, e, l) for (s, l), (e, _) in zip(starts, starts[1:])]
for module in (argparse, asyncio.base_events, collections, email.message, json.decoder, typing, difflib):
    source = open(module.__file__).read()
    for code in walk(compile(source, module.__file__, "exec")):
        table = code.co_linetable if hasattr(code, "co_linetable") else code.co_lnotab
        ranges = " ".join(f"{s}:{e}:{l or 0}" for s, e, l in lines(code))
        print(code.co_firstlineno, "x" + table.hex(), ranges)
)";

std::vector<uint8_t> unhex(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(uint8_t(std::stoul(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Every instruction's line as `python` reads it, and as python_line reads
// the table of kind `kind`.
void expect_lines_as_cpython(const std::string& python, PythonLineTable kind) {
  std::string dump = output_of(python + " -c '" + kDumpLines + "'");
  std::istringstream lines(dump);
  size_t codes = 0, units = 0, wrong = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    PythonCode code;
    code.kind = kind;
    std::string hex, range;
    in >> code.first_line >> hex;  // "x" before the bytes: a table may be empty
    code.linetable = unhex(hex.substr(1));
    ++codes;
    while (in >> range) {
      uint32_t start = 0, end = 0;
      int32_t want = 0;
      ASSERT_EQ(std::sscanf(range.c_str(), "%u:%u:%d", &start, &end, &want), 3) << range;
      for (uint32_t unit = start / 2; unit < end / 2; ++unit, ++units)
        if (python_line(code, unit) != want && ++wrong <= 5)
          ADD_FAILURE() << "unit " << unit << ": line " << python_line(code, unit) << ", CPython says "
                        << want;
    }
  }
  EXPECT_GT(codes, 500u);
  EXPECT_GT(units, 20000u);  // 3.8 has fewest: 32,502
  EXPECT_EQ(wrong, 0u);
}

TEST(PythonLineTable, ReadsEveryInstructionAsCPythonDoes) {
  expect_lines_as_cpython(kPython311, PythonLineTable::kLocations);
}

TEST(PythonLineTable, ReadsEveryInstructionAsEachPyenvVersionDoes) {
  auto found = test::pyenv_interpreters();
  if (found.empty()) GTEST_SKIP() << "no pyenv interpreter here";
  for (const test::PyenvInterpreter& i : found) {
    SCOPED_TRACE(i.path);
    auto table = python_table_layout(3, i.minor);
    expect_lines_as_cpython(i.path, table ? table->objects.line_table : PythonLineTable::kLocations);
  }
}

// A function's code object, read from a running interpreter as the
// recorder reads it: named, placed, and refused once its stamp (its first
// line and its file name's address, as the kernel read them) differs.
TEST(PythonCode, ReadsACodeObjectOfALiveInterpreter) {
  FILE* f = popen((std::string("exec ") + kPython311 +
                   " -c 'import os, sys, time\n"
                   "def outer():\n"
                   "    def naïve_inner():\n"
                   "        pass\n"
                   "    return naïve_inner\n"
                   "c = outer().__code__\n"
                   "print(os.getpid(), id(c), id(c.co_filename), flush=True)\n"
                   "time.sleep(60)'")
                      .c_str(),
                  "r");
  ASSERT_TRUE(f);
  long pid = 0;
  unsigned long long addr = 0, filename = 0;
  ASSERT_EQ(std::fscanf(f, "%ld %llu %llu", &pid, &addr, &filename), 3);
  auto elf = ElfFile::open(kPython311);
  ASSERT_TRUE(elf);
  auto p = read_python_program(*elf);
  ASSERT_TRUE(p);
  ReadMemory read = [pid](uint64_t at, std::span<uint8_t> out) {
    return read_process_memory(pid_t(pid), at, out);
  };
  // Debian's python3.11 is not position-independent: its addresses are its file's.
  auto code = read_python_code(p->objects, p->code_type, addr, AS_PY_CODE_STAMP(3, filename), read);
  auto other_line = read_python_code(p->objects, p->code_type, addr, AS_PY_CODE_STAMP(4, filename), read);
  auto other_file =
      read_python_code(p->objects, p->code_type, addr, AS_PY_CODE_STAMP(3, filename + 64), read);
  auto not_code = read_python_code(p->objects, p->code_type, addr + 16, AS_PY_CODE_STAMP(3, filename), read);
  kill(pid_t(pid), SIGKILL);
  pclose(f);
  ASSERT_TRUE(code);
  EXPECT_EQ(code->qualname, "outer.<locals>.naïve_inner");
  EXPECT_EQ(code->filename, "<string>");
  EXPECT_EQ(python_line(*code, 0), 3);
  EXPECT_FALSE(other_line);
  EXPECT_FALSE(other_file);
  EXPECT_FALSE(not_code);
}

std::vector<uint64_t> placed(std::vector<uint64_t> native, std::vector<bool> loop,
                             std::vector<PlacedPythonFrame> py, size_t* unplaced = nullptr) {
  PythonPlacement p = place_python_frames(native, loop, py);
  if (unplaced) *unplaced = p.unplaced;
  return p.ips;
}

TEST(PythonPlacement, EachLoopFrameGivesWayToTheFramesItsCallRan) {
  // calloc's caller 1, loop, C function 3, loop, main 5; Python f, g (first
  // of its call), h, i (first of its call).
  std::vector<PlacedPythonFrame> py = {{101, false}, {102, true}, {103, false}, {104, true}};
  size_t unplaced = 9;
  EXPECT_EQ(placed({1, 2, 3, 4, 5}, {false, true, false, true, false}, py, &unplaced),
            (std::vector<uint64_t>{1, 101, 102, 3, 103, 104, 5}));
  EXPECT_EQ(unplaced, 0u);
}

TEST(PythonPlacement, AFrameNotShownStillEndsItsCall) {
  std::vector<PlacedPythonFrame> py = {{0, true}, {102, true}};
  EXPECT_EQ(placed({1, 2, 3, 4}, {false, true, true, false}, py), (std::vector<uint64_t>{1, 102, 4}));
}

TEST(PythonPlacement, CallsWithoutALoopFrameGoOutermostBeforeTheTruncationMark) {
  std::vector<PlacedPythonFrame> py = {{101, true}, {102, false}, {103, true}};
  size_t unplaced = 0;
  EXPECT_EQ(placed({1, 2, 0}, {false, true, false}, py, &unplaced),
            (std::vector<uint64_t>{1, 101, 102, 103, 0}));
  EXPECT_EQ(unplaced, 2u);
}

TEST(PythonPlacement, LoopFramesBeyondThePythonFramesStayNative) {
  std::vector<PlacedPythonFrame> py = {{101, true}};
  EXPECT_EQ(placed({1, 2, 3, 4}, {false, true, true, false}, py), (std::vector<uint64_t>{1, 101, 3, 4}));
}

}  // namespace
}  // namespace allocscope
