#include "runtime/go/pclntab.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "runtime/go/build.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

constexpr uint32_t kPclnMagic118 = 0xfffffff0;  // Go 1.18, 1.19
constexpr uint32_t kPclnMagic120 = 0xfffffff1;  // Go 1.20 on
constexpr uint64_t kTableHeader = 72;           // magic, pads, quantum, pointer size, 8 words
constexpr int kMaxSteps = 1 << 20;              // a pc-value table longer than any function

uint64_t le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);  // x86-64 reads its own order
  return v;
}

}  // namespace

Result<GoPclntab> GoPclntab::parse(std::span<const uint8_t> table, uint64_t text) {
  if (table.size() < kTableHeader) return fail("a Go pclntab shorter than its header");
  uint32_t magic;
  std::memcpy(&magic, table.data(), sizeof magic);
  if (magic != kPclnMagic118 && magic != kPclnMagic120)
    return fail("a Go pclntab of a layout before Go 1.18 (magic " + std::to_string(magic) + ")");
  if (table[4] != 0 || table[5] != 0 || table[7] != 8 || (table[6] != 1 && table[6] != 2 && table[6] != 4))
    return fail("a Go pclntab of another machine (pointer size " + std::to_string(table[7]) + ")");
  GoPclntab t;
  t.t_ = table;
  t.layout_ = magic == kPclnMagic118 ? 118 : 120;
  t.quantum_ = table[6];
  t.nfunc_ = le64(&table[8]);
  // The header's own text start where the file holds it (a C linker puts
  // its start-up code before Go's), else .text's.
  t.text_ = le64(&table[24]) ? le64(&table[24]) : text;
  t.funcnames_ = le64(&table[32]);
  t.cutab_ = le64(&table[40]);
  t.filetab_ = le64(&table[48]);
  t.pctab_ = le64(&table[56]);
  t.functab_ = le64(&table[64]);
  for (uint64_t off : {t.funcnames_, t.cutab_, t.filetab_, t.pctab_, t.functab_})
    if (off < kTableHeader || off >= table.size()) return fail("a Go pclntab whose tables lie outside it");
  // The function table: nfunc (entry, _func offset) pairs, then the end's.
  uint64_t slots = (table.size() - t.functab_) / 8;
  if (t.nfunc_ == 0 || slots == 0 || t.nfunc_ > slots - 1)
    return fail("a Go pclntab whose function table lies outside it");
  return t;
}

std::optional<uint32_t> GoPclntab::u32(uint64_t at) const {
  if (at > t_.size() || t_.size() - at < 4) return std::nullopt;
  uint32_t v;
  std::memcpy(&v, t_.data() + at, sizeof v);
  return v;
}

std::optional<std::string_view> GoPclntab::string_at(uint64_t at) const {
  if (at >= t_.size()) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(t_.data() + at);
  size_t n = strnlen(p, t_.size() - at);
  if (n == t_.size() - at) return std::nullopt;  // no end inside the table
  return std::string_view(p, n);
}

// _func: entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln, npcdata,
// cuOffset (u32 each), then Go 1.20's startLine, then funcID and flag bytes.
std::optional<GoPclntab::Func> GoPclntab::func(uint64_t index) const {
  auto off = u32(functab_ + index * 8 + 4);
  if (!off) return std::nullopt;
  uint64_t at = functab_ + *off;
  auto entry = u32(at), name = u32(at + 4), pcsp = u32(at + 16), pcfile = u32(at + 20), pcln = u32(at + 24),
       npcdata = u32(at + 28), cu = u32(at + 32), ids = u32(at + (layout_ == 118 ? 36 : 40));
  if (!entry || !name || !pcsp || !pcfile || !pcln || !npcdata || !cu || !ids) return std::nullopt;
  return Func{text_ + *entry, *name, *pcsp, *pcfile, *pcln, *cu, uint8_t(*ids >> 8), at, *npcdata};
}

std::optional<uint64_t> GoPclntab::index_of(uint64_t vaddr) const {
  if (vaddr < text_) return std::nullopt;
  uint64_t pc = vaddr - text_, lo = 0, hi = nfunc_;  // entries [lo, hi) start at or before pc
  auto end = u32(functab_ + nfunc_ * 8);
  if (!end || pc >= *end) return std::nullopt;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    auto e = u32(functab_ + mid * 8);
    if (!e) return std::nullopt;
    (*e <= pc ? lo : hi) = mid;
  }
  auto first = u32(functab_ + lo * 8);
  if (!first || *first > pc) return std::nullopt;
  return lo;
}

// A pc-value table (Go's runtime.pcvalue): from value -1 at the entry,
// pairs of (zig-zag value delta, pc delta in quanta), both varints, ended
// by a zero value delta (but at the entry, Go's own rule).
template <typename Visit>
bool GoPclntab::each_pc_value(uint32_t offset, uint64_t entry, Visit&& visit) const {
  if (offset == 0) return false;
  size_t p = pctab_ + offset;
  uint64_t pc = entry;
  uint32_t value = UINT32_MAX;  // -1; sums wrap, as Go's int32 does
  auto varint = [&]() -> std::optional<uint32_t> {
    auto v = go_uvarint(t_, &p);
    return v && *v <= UINT32_MAX ? std::optional<uint32_t>(uint32_t(*v)) : std::nullopt;
  };
  for (int step = 0; step < kMaxSteps; ++step) {
    auto delta = varint();
    if (!delta) return false;
    if (*delta == 0 && pc != entry) return true;
    value += (*delta & 1) ? ~(*delta >> 1) : *delta >> 1;
    auto advance = varint();
    if (!advance) return false;
    uint64_t next = pc + uint64_t(*advance) * quantum_;
    if (!visit(pc, next, int32_t(value))) return true;
    pc = next;
  }
  return false;
}

std::optional<int32_t> GoPclntab::pc_value(uint32_t offset, uint64_t entry, uint64_t vaddr) const {
  std::optional<int32_t> found;
  bool ok = each_pc_value(offset, entry, [&](uint64_t, uint64_t end, int32_t value) {
    if (vaddr < end) found = value;
    return !found;
  });
  return ok ? found : std::nullopt;
}

// Each function's runs end where the next function starts: a table that
// says otherwise (or a file whose functions share one table) describes no
// more than the code. A budget of steps bounds the whole read.
std::vector<GoSpRun> GoPclntab::sp_runs() const {
  constexpr uint64_t kMaxRunSteps = 1 << 24;  // far above any real program's
  std::vector<GoSpRun> runs;
  auto end = u32(functab_ + nfunc_ * 8);
  uint64_t steps = 0;
  for (uint64_t i = 0; i < nfunc_ && end && steps < kMaxRunSteps; ++i) {
    auto f = func(i);
    auto next = i + 1 < nfunc_ ? u32(functab_ + (i + 1) * 8) : end;
    if (!f || !next) continue;
    uint64_t limit = std::max(text_ + *next, f->entry);
    size_t kept = runs.size();
    bool ok = each_pc_value(f->pcsp, f->entry, [&](uint64_t start, uint64_t stop, int32_t sp) {
      if (start >= limit || ++steps >= kMaxRunSteps) return false;
      if (stop > start) runs.push_back({start, std::min(stop, limit), sp, f->flag});
      return true;
    });
    if (!ok) runs.resize(kept);  // a malformed table: none of its runs
  }
  return runs;
}

GoPosition GoPclntab::position(const Func& f, std::string_view name, uint64_t vaddr) const {
  GoPosition pos{std::string(name), "", 0};
  if (auto line = pc_value(f.pcln, f.entry, vaddr); line && *line > 0) pos.line = *line;
  if (auto fileno = pc_value(f.pcfile, f.entry, vaddr); fileno && *fileno >= 0)
    if (auto file_off = u32(cutab_ + (uint64_t(f.cu) + uint32_t(*fileno)) * 4))
      if (auto file = string_at(filetab_ + *file_off)) pos.file = *file;
  return pos;
}

std::optional<GoPosition> GoPclntab::at(uint64_t vaddr) const {
  auto index = index_of(vaddr);
  auto f = index ? func(*index) : std::nullopt;
  auto name = f ? string_at(funcnames_ + f->name_off) : std::nullopt;
  if (!name) return std::nullopt;
  return position(*f, *name, vaddr);
}

// The inline tree is the function's data slot 3 (_FUNCDATA_InlTree), an
// offset from go:func.*; the index into it at each pc is its pc-value
// table 2 (_PCDATA_InlTreeIndex). The _func's fixed fields end with
// nfuncdata, a byte: 40 bytes, 44 from Go 1.20 (startLine).
std::optional<uint64_t> GoPclntab::inline_tree(const Func& f) const {
  uint64_t fixed = layout_ == 118 ? 40 : 44;
  if (gofunc_.empty() || f.npcdata <= 2 || f.at + fixed > t_.size() || t_[f.at + fixed - 1] <= 3)
    return std::nullopt;
  auto off = u32(f.at + fixed + uint64_t(f.npcdata) * 4 + 3 * 4);
  if (!off || *off == UINT32_MAX || *off >= gofunc_.size()) return std::nullopt;
  return *off;
}

// An inlinedCall: Go 1.18-1.19 {parent i16, funcID u8, pad, file i32,
// line i32, nameOff i32, parentPc i32}, 20 bytes; Go 1.20 on {funcID u8,
// pad[3], nameOff i32, parentPc i32, startLine i32}, 16 bytes. Each call's
// site is the position of the instruction at parentPc, in the caller.
std::vector<GoPosition> GoPclntab::frames(uint64_t vaddr) const {
  std::vector<GoPosition> out;
  auto index = index_of(vaddr);
  auto f = index ? func(*index) : std::nullopt;
  auto name = f ? string_at(funcnames_ + f->name_off) : std::nullopt;
  if (!name) return out;
  auto tree = inline_tree(*f);
  auto ix_at = [&](uint64_t pc) -> int32_t {
    auto slot = u32(f->at + (layout_ == 118 ? 40 : 44) + 2 * 4);
    auto ix = tree && slot ? pc_value(*slot, f->entry, pc) : std::nullopt;
    return ix ? *ix : -1;
  };
  const uint64_t size = layout_ == 118 ? 20 : 16, name_at = layout_ == 118 ? 12 : 4, parent_at = name_at + 4;
  uint64_t pc = vaddr;
  for (int32_t ix = ix_at(pc); ix >= 0 && out.size() < 64; ix = ix_at(pc)) {
    uint64_t call = *tree + uint64_t(ix) * size;
    if (call + size > gofunc_.size()) break;
    int32_t name_off, parent_pc;
    std::memcpy(&name_off, &gofunc_[call + name_at], 4);
    std::memcpy(&parent_pc, &gofunc_[call + parent_at], 4);
    auto callee = string_at(funcnames_ + uint32_t(name_off));
    if (!callee || parent_pc < 0) break;
    out.push_back(position(*f, *callee, pc));
    pc = f->entry + uint64_t(parent_pc);
  }
  out.push_back(position(*f, *name, pc));
  return out;
}

std::optional<uint64_t> GoPclntab::entry(std::string_view function) const {
  if (by_name_.empty())
    for (uint64_t i = 0; i < nfunc_; ++i)
      if (auto f = func(i))
        if (auto name = string_at(funcnames_ + f->name_off)) by_name_.try_emplace(*name, f->entry);
  auto it = by_name_.find(function);
  return it == by_name_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
}

std::vector<std::string_view> GoPclntab::names_starting(std::string_view prefix) const {
  entry("");  // the names, read once
  std::vector<std::string_view> out;
  for (const auto& [name, at] : by_name_)
    if (name.starts_with(prefix)) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::pair<uint64_t, uint64_t>> GoPclntab::range(std::string_view function) const {
  auto start = entry(function);
  auto index = start ? index_of(*start) : std::nullopt;
  auto end = index ? u32(functab_ + (*index + 1) * 8) : std::nullopt;  // entry nfunc: the end of the text
  if (!end || text_ + *end <= *start) return std::nullopt;
  return std::pair{*start, text_ + *end};
}

namespace {

std::span<const uint8_t> section_bytes(Elf_Scn* scn) {
  Elf_Data* data = scn ? elf_getdata(scn, nullptr) : nullptr;
  if (!data || !data->d_buf) return {};
  return {static_cast<const uint8_t*>(data->d_buf), data->d_size};
}

// An externally linked PIE keeps the table in .data.rel.ro, where only its
// header tells it: the first pointer-aligned one that reads as a table.
// Gives its offset there.
std::optional<std::pair<GoPclntab, uint64_t>> search_relro(std::span<const uint8_t> relro, uint64_t text) {
  for (size_t at = 0; at + 8 <= relro.size(); at += 8) {
    if (relro[at + 1] != 0xff || relro[at + 2] != 0xff || relro[at + 3] != 0xff) continue;
    if (auto t = GoPclntab::parse(relro.subspan(at), text)) return std::pair{std::move(*t), uint64_t(at)};
  }
  return std::nullopt;
}

// The bytes of the allocated section holding `vaddr`, from there on.
std::span<const uint8_t> bytes_at(Elf* e, uint64_t vaddr) {
  for (Elf_Scn* scn = elf_nextscn(e, nullptr); scn; scn = elf_nextscn(e, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC)) continue;
    if (vaddr < sh.sh_addr || vaddr - sh.sh_addr >= sh.sh_size) continue;
    return section_bytes(scn).subspan(std::min<uint64_t>(vaddr - sh.sh_addr, section_bytes(scn).size()));
  }
  return {};
}

// A PIE's pointers are zero in the file, each set at load by a RELATIVE
// relocation whose addend is the value: these, by place.
std::unordered_map<uint64_t, uint64_t> relative_relocations(Elf* e) {
  std::unordered_map<uint64_t, uint64_t> out;
  Elf_Scn* rela = find_section(e, ".rela.dyn");
  Elf_Data* data = rela ? elf_getdata(rela, nullptr) : nullptr;
  for (size_t i = 0; data && i < data->d_size / sizeof(Elf64_Rela); ++i) {
    GElf_Rela r;
    if (gelf_getrela(data, int(i), &r) && GELF_R_TYPE(r.r_info) == R_X86_64_RELATIVE)
      out.emplace(r.r_offset, uint64_t(r.r_addend));
  }
  return out;
}

// Go's runtime finds a function's data through its module's moduledata
// (runtime.firstmoduledata), which strip leaves unnamed: it is the one
// whose first word points at the table and whose function table's length
// is the table's, and its `gofunc` field (after the table's slices and 19
// words; Go 1.20 added two) says where go:func.* starts.
void find_func_data(Elf* e, GoPclntab& table, uint64_t table_vaddr) {
  auto relocs = relative_relocations(e);
  auto word = [&](uint64_t vaddr) -> std::optional<uint64_t> {
    if (auto r = relocs.find(vaddr); r != relocs.end()) return r->second;
    std::span<const uint8_t> b = bytes_at(e, vaddr);
    return b.size() >= 8 ? std::optional<uint64_t>(le64(b.data())) : std::nullopt;
  };
  const uint64_t ftab_len = 136, gofunc = table.layout() == 118 ? 304 : 320;
  auto try_module = [&](uint64_t vaddr) {
    auto len = word(vaddr + ftab_len), data = word(vaddr + gofunc);
    if (!len || *len != table.functions() + 1 || !data) return false;
    std::span<const uint8_t> bytes = bytes_at(e, *data);
    if (bytes.empty()) return false;
    table.set_func_data(bytes, *data);
    return true;
  };
  for (const auto& [place, value] : relocs)
    if (value == table_vaddr && try_module(place)) return;
  for (const char* name : {".noptrdata", ".data", ".data.rel.ro"}) {
    Elf_Scn* scn = find_section(e, name);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh)) continue;
    std::span<const uint8_t> b = section_bytes(scn);
    for (size_t at = 0; at + 8 <= b.size(); at += 8)
      if (le64(&b[at]) == table_vaddr && try_module(sh.sh_addr + at)) return;
  }
}

}  // namespace

// The table is .gopclntab (an internally linked PIE: .data.rel.ro.gopclntab),
// or inside .data.rel.ro (an externally linked PIE, cgo's usual build).
Result<GoPclntab> go_pclntab(Elf* e) {
  GElf_Shdr text;
  Elf_Scn* text_scn = find_section(e, ".text");
  if (!text_scn || !gelf_getshdr(text_scn, &text)) return fail("no .text section");
  Elf_Scn* scn = find_section(e, ".gopclntab");
  if (!scn) scn = find_section(e, ".data.rel.ro.gopclntab");
  std::optional<std::pair<GoPclntab, uint64_t>> found;
  if (scn) {
    auto parsed = GoPclntab::parse(section_bytes(scn), text.sh_addr);
    if (!parsed) return fail(parsed.error());
    found.emplace(std::move(*parsed), 0);
  } else {
    scn = find_section(e, ".data.rel.ro");
    found = search_relro(section_bytes(scn), text.sh_addr);
  }
  GElf_Shdr sh;
  if (!found || !gelf_getshdr(scn, &sh))
    return fail("no Go pclntab (no .gopclntab section, none in .data.rel.ro)");
  find_func_data(e, found->first, sh.sh_addr + found->second);
  return std::move(found->first);
}

Result<GoPclntab> go_pclntab(const ElfFile& elf) {
  auto table = go_pclntab(elf.elf());
  if (!table) return fail(elf.path() + ": " + table.error().message);
  return table;
}

}  // namespace allocscope
