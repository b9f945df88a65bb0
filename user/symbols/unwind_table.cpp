#include "symbols/unwind_table.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "symbols/signal_trampoline.h"
#include "symbols/unwind_step.h"

namespace allocscope {
namespace {

constexpr int kRegRbp = 6, kRegRsp = 7, kRegRip = 16;  // DWARF x86-64 numbers

struct Segment {
  uint64_t vaddr, offset, filesz;
};

// Executable PT_LOAD segments: the code rows can describe.
std::vector<Segment> code_segments(Elf* elf) {
  std::vector<Segment> out;
  size_t n = 0;
  if (elf_getphdrnum(elf, &n) != 0) return out;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, int(i), &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      out.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
  }
  return out;
}

std::optional<uint64_t> file_offset(const std::vector<Segment>& segs, uint64_t vaddr) {
  for (const Segment& s : segs)
    if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) return vaddr - s.vaddr + s.offset;
  return std::nullopt;
}

// FDE start addresses, sorted: .eh_frame_hdr's search table read where it
// lies (a large program's has a million entries: a copy of it took 7 MB
// while the table was built), or a list.
class FdeStarts {
 public:
  explicit FdeStarts(std::vector<uint64_t> list) : list_(std::move(list)), n_(list_.size()) {}
  FdeStarts(const uint8_t* table, size_t n, uint64_t base) : table_(table), n_(n), base_(base) {}
  size_t size() const { return n_; }
  uint64_t operator[](size_t i) const {
    if (!table_) return list_[i];
    int32_t rel;
    std::memcpy(&rel, table_ + 8 * i, 4);
    return base_ + int64_t(rel);
  }

 private:
  std::vector<uint64_t> list_;
  const uint8_t* table_ = nullptr;
  size_t n_ = 0;
  uint64_t base_ = 0;
};

// .eh_frame_hdr's search table, in the encoding every GNU and LLVM linker
// writes (sdata4 relative to the header).
std::optional<FdeStarts> eh_frame_hdr_starts(Elf* elf) {
  Elf_Scn* scn = find_section(elf, ".eh_frame_hdr");
  GElf_Shdr sh;
  Elf_Data* d = scn && gelf_getshdr(scn, &sh) ? elf_getdata(scn, nullptr) : nullptr;
  if (!d || d->d_size < 12) return std::nullopt;
  const auto* h = static_cast<const uint8_t*>(d->d_buf);
  constexpr uint8_t kUdata4 = 0x03, kSdata4 = 0x0b, kDatarelSdata4 = 0x3b;
  if (h[0] != 1 || (h[1] & 0x0f) != kSdata4 || h[2] != kUdata4 || h[3] != kDatarelSdata4) return std::nullopt;
  uint32_t count;
  std::memcpy(&count, h + 8, 4);
  if ((d->d_size - 12) / 8 < count) return std::nullopt;
  return FdeStarts(h + 12, count, sh.sh_addr);
}

// .debug_frame FDEs hold their start as a plain 8-byte address.
std::vector<uint64_t> debug_frame_starts(Elf* elf) {
  std::vector<uint64_t> starts;
  Elf_Scn* scn = find_section(elf, ".debug_frame");
  Elf_Data* d = scn ? elf_getdata(scn, nullptr) : nullptr;
  const char* ident = elf_getident(elf, nullptr);
  if (!d || !ident) return starts;
  Dwarf_Off off = 0, next;
  Dwarf_CFI_Entry e;
  while (dwarf_next_cfi(reinterpret_cast<const unsigned char*>(ident), d, false, off, &next, &e) == 0) {
    if (!dwarf_cfi_cie_p(&e) && e.fde.end - e.fde.start >= 8) {
      uint64_t start;
      std::memcpy(&start, e.fde.start, 8);
      starts.push_back(start);
    }
    off = next;
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

std::vector<uint64_t> symbol_starts(const ElfFile& f) {
  std::vector<uint64_t> starts;
  for (const ElfSymbol& s : f.functions()) starts.push_back(s.vaddr);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

bool fits_units(int64_t bytes, int64_t lo, int64_t hi) {
  return bytes % 8 == 0 && bytes / 8 >= lo && bytes / 8 <= hi;
}

// A register rule "saved at CFA + n": [DW_OP_call_frame_cfa, DW_OP_plus_uconst n]
// (elfutils' form of DW_CFA_offset), or plain [DW_OP_call_frame_cfa] for n = 0.
std::optional<int64_t> saved_at_cfa(const Dwarf_Op* ops, size_t n) {
  if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) return 0;
  if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst)
    return int64_t(ops[1].number);
  return std::nullopt;
}

// The CFA rule, or nullopt for one the kernel cannot follow.
std::optional<std::pair<uint8_t, int16_t>> cfa_rule(Dwarf_Frame* fr) {
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(fr, &ops, &n) != 0 || n == 0) return std::nullopt;
  if (n == 1 && ops[0].atom == DW_OP_bregx) {
    int64_t off = int64_t(ops[0].number2);
    if ((ops[0].number != kRegRsp && ops[0].number != kRegRbp) || !fits_units(off, INT16_MIN, INT16_MAX))
      return std::nullopt;
    return std::pair{uint8_t(ops[0].number == kRegRsp ? AS_CFA_RSP : AS_CFA_RBP), int16_t(off / 8)};
  }
  // GNU ld's .plt: rsp + 8 + ((rip & 15) >= N) << 3.
  static const uint8_t plt[] = {DW_OP_breg7, DW_OP_breg16, DW_OP_lit15, DW_OP_and, 0,
                                DW_OP_ge,    DW_OP_lit3,   DW_OP_shl,   DW_OP_plus};
  if (n == std::size(plt) && ops[0].number == 8 && ops[1].number == 0 && ops[4].atom >= DW_OP_lit0 &&
      ops[4].atom <= DW_OP_lit31 &&
      std::equal(ops, ops + n, plt, [](const Dwarf_Op& o, uint8_t a) { return a == 0 || o.atom == a; }))
    return std::pair{uint8_t(AS_CFA_PLT), int16_t(ops[4].atom - DW_OP_lit0)};
  // A realigned frame (GCC's DRAP): the CFA saved below rbp.
  if (n == 2 && ops[0].atom == DW_OP_breg6 && ops[1].atom == DW_OP_deref &&
      fits_units(int64_t(ops[0].number), INT16_MIN, INT16_MAX))
    return std::pair{uint8_t(AS_CFA_DEREF_RBP), int16_t(int64_t(ops[0].number) / 8)};
  return std::nullopt;
}

as_unwind_row row_for(Dwarf_Frame* fr) {
  as_unwind_row none{0, 0, AS_ROW_NONE, 0};
  Dwarf_Op mem[3], *ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_register(fr, kRegRip, mem, &ops, &n) != 0) return none;
  if (n == 0 && ops == mem)  // return address undefined: the outermost frame
    return {0, 0, AS_ROW_END, 0};
  if (saved_at_cfa(ops, n) != -8) return none;
  auto cfa = cfa_rule(fr);
  if (!cfa) return none;
  as_unwind_row r{0, cfa->second, cfa->first, 0};
  if (dwarf_frame_register(fr, kRegRbp, mem, &ops, &n) != 0) return none;
  if (n == 0 && !ops) {
    r.rbp = 0;  // same value
  } else if (auto at = saved_at_cfa(ops, n); at && fits_units(*at, INT8_MIN + 1, INT8_MAX) && *at != 0) {
    r.rbp = int8_t(*at / 8);
  } else {
    r.rbp = AS_RBP_LOST;
  }
  return r;
}

// A signal's return trampoline (glibc's __restore_rt, which the kernel makes
// a handler return to): its FDE, marked a signal frame, says where the kernel
// saved the interrupted registers, as expressions of rsp: CFA (the
// interrupted rsp) = *(rsp + a), rip at rsp + a + 8, rbp at rsp + b. elfutils
// gives DW_CFA_expression rules as [DW_OP_call_frame_cfa, expression].
as_unwind_row signal_row(Dwarf_Frame* fr) {
  as_unwind_row none{0, 0, AS_ROW_NONE, 0};
  Dwarf_Op mem[3], *ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(fr, &ops, &n) != 0 || n != 2 || ops[0].atom != DW_OP_breg7 ||
      ops[1].atom != DW_OP_deref)
    return none;
  int64_t sp_at = int64_t(ops[0].number);
  auto saved_at_rsp = [&](int reg) -> std::optional<int64_t> {
    if (dwarf_frame_register(fr, reg, mem, &ops, &n) != 0 || n != 2 || ops[0].atom != DW_OP_call_frame_cfa ||
        ops[1].atom != DW_OP_breg7)
      return std::nullopt;
    return int64_t(ops[1].number);
  };
  auto rip = saved_at_rsp(kRegRip), rbp = saved_at_rsp(kRegRbp);
  if (!rip || !rbp || *rip != sp_at + 8 || !fits_units(sp_at, 0, INT16_MAX) || !fits_units(*rbp, 0, INT8_MAX))
    return none;
  return {0, int16_t(sp_at / 8), AS_CFA_SIGNAL, int8_t(*rbp / 8)};
}

struct CfiCloser {
  void operator()(Dwarf_CFI* c) const { dwarf_cfi_end(c); }
};
struct DwarfCloser {
  void operator()(Dwarf* d) const { dwarf_end(d); }
};

bool same_rule(const as_unwind_row& a, const as_unwind_row& b) {
  return a.kind == b.kind && a.cfa_off == b.cfa_off && a.rbp == b.rbp;
}

// Rows in vaddr order, kept as file offsets: a row at the same vaddr as the
// last replaces it, and one with the last's rule adds nothing. The last is
// held until the next arrives, so that only rows of the final table are
// stored (a large program's table was built in twice its final size).
class RowWriter {
 public:
  RowWriter(const std::vector<Segment>& segs, std::vector<as_unwind_row>& out) : segs_(segs), out_(out) {}
  ~RowWriter() { flush(); }
  void push(uint64_t vaddr, as_unwind_row r) {
    if (held_ && vaddr == vaddr_) {
      rule_ = r;
      return;
    }
    if (held_ && same_rule(rule_, r)) return;
    flush();
    held_ = true, vaddr_ = vaddr, rule_ = r;
  }
  bool any() const { return held_; }
  uint64_t last_vaddr() const { return vaddr_; }

 private:
  void flush() {
    if (!held_) return;
    auto off = file_offset(segs_, vaddr_);
    if (!off || *off > UINT32_MAX) return;
    as_unwind_row row = rule_;
    row.pc = uint32_t(*off);
    out_.push_back(row);
  }
  const std::vector<Segment>& segs_;
  std::vector<as_unwind_row>& out_;
  bool held_ = false;
  uint64_t vaddr_ = 0;
  as_unwind_row rule_{};
};

// Code between FDEs, while the table is built: no information, marked
// apart from the rows elfutils could not express (cfa_off 0).
constexpr as_unwind_row kGap{0, 1, AS_ROW_NONE, 0};
bool is_gap(const as_unwind_row& r) { return r.kind == kGap.kind && r.cfa_off == kGap.cfa_off; }

// Code between FDEs has no information: hand-written assembly, such as the
// builtins a JIT compiled into the file (V8's, whose frames the JIT code
// shares). Walked by frame pointers then, as JIT code is, and checked as
// every step is.
void walk_gaps_by_frame_pointers(std::vector<as_unwind_row>& rows) {
  as_unwind_row fp = as_frame_pointer_row();
  for (as_unwind_row& r : rows) {
    if (is_gap(r)) {
      fp.pc = r.pc;
      r = fp;
    }
  }
}

// Rows for every FDE that starts at one of `starts`.
void add_rows(Dwarf_CFI* cfi, const FdeStarts& starts, const std::vector<Segment>& segs, UnwindTable& t) {
  RowWriter rows(segs, t.rows);
  for (size_t i = 0; i < starts.size(); ++i) {
    uint64_t limit = i + 1 < starts.size() ? starts[i + 1] : std::numeric_limits<uint64_t>::max();
    uint64_t pc = starts[i];
    if (rows.any() && pc < rows.last_vaddr())
      continue;  // inside a range already described (aliases of one FDE)
    bool any = false;
    while (pc < limit) {
      Dwarf_Frame* fr = nullptr;
      if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0) break;
      std::unique_ptr<Dwarf_Frame, decltype(&std::free)> owned(fr, &std::free);
      Dwarf_Addr start = 0, end = 0;
      bool signal = false;
      if (dwarf_frame_info(fr, &start, &end, &signal) < 0 || end <= pc) break;
      as_unwind_row r = signal ? signal_row(fr) : row_for(fr);
      t.unsupported += r.kind == AS_ROW_NONE;
      rows.push(pc, r);
      any = true;
      pc = end;
    }
    t.fdes += any;
    if (any && pc < limit) rows.push(pc, kGap);  // code between FDEs (walk_gaps_by_frame_pointers)
  }
}

// A runtime's functions described by its own tables, the rest of the rows
// (a cgo program's C code, by .eh_frame) kept outside them. Go's compiler
// writes no .eh_frame, and its .debug_frame goes with strip; the pclntab stays.
void add_runtime_rows(const RuntimeTables& tables, const std::vector<Segment>& segs, UnwindTable& t) {
  std::vector<as_unwind_row> others = std::move(t.rows), rows;
  std::sort(others.begin(), others.end(),
            [](const as_unwind_row& a, const as_unwind_row& b) { return a.pc < b.pc; });
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // file offsets Go's rows cover, sorted
  for (const RuntimeRun& run : tables.unwind_runs()) {
    auto start = file_offset(segs, run.start), last = file_offset(segs, run.end - 1);
    if (!start || !last || *last > UINT32_MAX || *last - *start != run.end - 1 - run.start) continue;
    as_unwind_row row = run.rule;
    row.pc = uint32_t(*start);
    rows.push_back(row);
    ++t.runtime_runs;
    if (!spans.empty() && spans.back().second == *start)
      spans.back().second = *last + 1;
    else
      spans.emplace_back(*start, *last + 1);
  }
  auto inside = [&](uint64_t pc) {
    auto it = std::upper_bound(spans.begin(), spans.end(), std::pair{pc, UINT64_MAX});
    return it != spans.begin() && pc < (it - 1)->second;
  };
  for (const as_unwind_row& r : others)
    if (!inside(r.pc)) rows.push_back(r);
  for (const auto& [start, end] : spans)  // past a span, what the other rows say there
    if (!inside(end) && end <= UINT32_MAX) {
      const as_unwind_row* before = find_row(others, end);
      as_unwind_row r = before ? *before : as_unwind_row{0, 0, AS_ROW_NONE, 0};
      r.pc = uint32_t(end);
      rows.push_back(r);
    }
  t.rows = std::move(rows);
  t.source = UnwindTable::Source::Runtime;
  t.runtime = tables.name();
}

// Consecutive rows of one rule are one row.
void merge_equal_rows(std::vector<as_unwind_row>& rows) {
  rows.erase(std::unique(rows.begin(), rows.end(), same_rule), rows.end());
}

// Linux's x86-64 signal frame, as a handler's return finds it at rsp: struct
// ucontext, whose uc_mcontext (at 40) keeps rbp at 120, rsp at 160, rip at 168.
constexpr int16_t kSignalRsp = 160 / 8;
constexpr int8_t kSignalRbp = 120 / 8;

// A trampoline's row over [from, to), unless call frame information
// describes the code there already (glibc's, marked a signal frame).
void place_signal_row(std::vector<as_unwind_row>& rows, uint32_t from, uint32_t to) {
  if (const as_unwind_row* covering = find_row(rows, from); covering && covering->kind != AS_ROW_NONE) return;
  const as_unwind_row* after = find_row(rows, to);
  as_unwind_row rest = after ? *after : as_unwind_row{0, 0, AS_ROW_NONE, 0};
  rest.pc = to;
  auto at = [&](uint32_t pc) {
    return std::lower_bound(rows.begin(), rows.end(), pc,
                            [](const as_unwind_row& r, uint32_t v) { return r.pc < v; });
  };
  auto hi = at(to);
  bool rest_needed = hi == rows.end() || hi->pc != to;
  auto it = rows.erase(at(from), hi);
  it = rows.insert(it, {from, kSignalRsp, AS_CFA_SIGNAL, kSignalRbp});
  if (rest_needed) rows.insert(it + 1, rest);
}

// Signal trampolines no FDE describes (musl's __restore_rt, in its libc.so
// and in static programs), found as libunwind finds them: by the
// rt_sigreturn call. A handler returns to its first byte, so the row starts
// one byte before (musl puts a nop there for unwinders). `rows` sorted by pc.
void add_signal_trampolines(const ElfFile& f, const std::vector<Segment>& segs,
                            std::vector<as_unwind_row>& rows) {
  for (const Segment& s : segs)
    for (uint64_t off : sigreturn_code_offsets(f, s.offset, s.offset + s.filesz))
      if (off > s.offset && off + sizeof kSigreturnCode <= UINT32_MAX)
        place_signal_row(rows, uint32_t(off - 1), uint32_t(off + sizeof kSigreturnCode));
}

}  // namespace

Result<UnwindTable> build_unwind_table(const ElfFile& f, const RuntimeTablesReaders& runtime_tables) {
  Elf* elf = f.elf();
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
    return fail("unwind table of " + f.path() + ": not an x86-64 ELF file");
  std::vector<Segment> segs = code_segments(elf);
  UnwindTable t;
  if (find_section(elf, ".eh_frame")) {
    std::unique_ptr<Dwarf_CFI, CfiCloser> cfi(dwarf_getcfi_elf(elf));
    if (cfi) {
      auto starts = eh_frame_hdr_starts(elf);
      add_rows(cfi.get(), starts ? *starts : FdeStarts(symbol_starts(f)), segs, t);
    }
  }
  std::unique_ptr<RuntimeTables> own = read_runtime_tables(runtime_tables, elf);
  if (own) {
    add_runtime_rows(*own, segs, t);
  } else if (t.rows.empty() && find_section(elf, ".debug_frame")) {
    std::unique_ptr<Dwarf, DwarfCloser> dw(dwarf_begin_elf(elf, DWARF_C_READ, nullptr));
    if (Dwarf_CFI* cfi = dw ? dwarf_getcfi(dw.get()) : nullptr) {
      t.source = UnwindTable::Source::DebugFrame;
      add_rows(cfi, FdeStarts(debug_frame_starts(elf)), segs, t);
    }
  }
  if (t.rows.empty()) {
    t.source = UnwindTable::Source::FramePointers;
    t.rows.push_back({0, 2, AS_CFA_RBP, -2});
  }
  std::stable_sort(t.rows.begin(), t.rows.end(),
                   [](const as_unwind_row& a, const as_unwind_row& b) { return a.pc < b.pc; });
  if (own) merge_equal_rows(t.rows);
  if (t.source != UnwindTable::Source::FramePointers) add_signal_trampolines(f, segs, t.rows);
  // Code at the entry point that no FDE describes (the dynamic loader's
  // _start and _dl_start_user) is the process's first frame: nothing called it.
  if (auto entry = file_offset(segs, eh.e_entry)) {
    auto it = std::upper_bound(t.rows.begin(), t.rows.end(), *entry,
                               [](uint64_t v, const as_unwind_row& r) { return v < r.pc; });
    if (it != t.rows.begin() && (it - 1)->kind == AS_ROW_NONE) (it - 1)->kind = AS_ROW_END;
  }
  walk_gaps_by_frame_pointers(t.rows);
  t.rows.shrink_to_fit();  // kept while the file is mapped: its growth's slack is not
  return t;
}

Result<UnwindTable> build_unwind_table(const std::string& path, const RuntimeTablesReaders& runtime_tables) {
  auto f = ElfFile::open(path);
  if (!f) return fail(f.error());
  return build_unwind_table(*f, runtime_tables);
}

const as_unwind_row* find_row(std::span<const as_unwind_row> rows, uint64_t pc) {
  auto it = std::upper_bound(rows.begin(), rows.end(), pc,
                             [](uint64_t v, const as_unwind_row& r) { return v < r.pc; });
  return it == rows.begin() ? nullptr : &*(it - 1);
}

namespace {
uint32_t layout_pages(std::span<const as_unwind_row> rows) {
  return rows.empty() ? 1 : (rows.back().pc >> AS_TABLE_PAGE_SHIFT) + 1;
}
}  // namespace

size_t kernel_layout_size(std::span<const as_unwind_row> rows) {
  return AS_TABLE_HEAD + layout_pages(rows) + 1 + rows.size();
}

void write_kernel_layout(std::span<const as_unwind_row> rows, std::span<as_unwind_row> out) {
  uint32_t n = uint32_t(rows.size()), pages = layout_pages(rows);
  auto w = out.begin();
  *w++ = {n, 0, AS_ROW_NONE, 0};
  *w++ = {pages, 0, AS_ROW_NONE, 0};
  size_t at = 0;
  for (uint32_t p = 0; p <= pages; ++p) {
    uint64_t start = uint64_t(p) << AS_TABLE_PAGE_SHIFT;
    while (at < rows.size() && rows[at].pc < start) ++at;
    *w++ = {p == pages ? n : uint32_t(at), 0, AS_ROW_NONE, 0};
  }
  std::copy(rows.begin(), rows.end(), w);
}

std::vector<as_unwind_row> kernel_layout(std::span<const as_unwind_row> rows) {
  std::vector<as_unwind_row> out(kernel_layout_size(rows));
  write_kernel_layout(rows, out);
  return out;
}

const char* source_name(const UnwindTable& t) {
  switch (t.source) {
    case UnwindTable::Source::EhFrame:
      return ".eh_frame";
    case UnwindTable::Source::DebugFrame:
      return ".debug_frame";
    case UnwindTable::Source::FramePointers:
      return "frame pointers";
    case UnwindTable::Source::Runtime:
      return t.runtime;
  }
  return "?";
}

}  // namespace allocscope
