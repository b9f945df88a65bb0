#include "symbols/go_pclntab.h"

#include <gelf.h>

#include <cstring>

#include "symbols/elf_file.h"
#include "symbols/go_build.h"

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
       cu = u32(at + 32), ids = u32(at + (layout_ == 118 ? 36 : 40));
  if (!entry || !name || !pcsp || !pcfile || !pcln || !cu || !ids) return std::nullopt;
  return Func{text_ + *entry, *name, *pcsp, *pcfile, *pcln, *cu, uint8_t(*ids >> 8)};
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

std::vector<GoSpRun> GoPclntab::sp_runs() const {
  std::vector<GoSpRun> runs;
  size_t kept = 0;
  for (uint64_t i = 0; i < nfunc_; ++i) {
    auto f = func(i);
    if (!f) continue;
    bool ok = each_pc_value(f->pcsp, f->entry, [&](uint64_t start, uint64_t end, int32_t sp) {
      if (end > start) runs.push_back({start, end, sp, f->flag});
      return true;
    });
    if (ok)
      kept = runs.size();
    else
      runs.resize(kept);  // a malformed table: none of its runs
  }
  return runs;
}

std::optional<GoPosition> GoPclntab::at(uint64_t vaddr) const {
  auto index = index_of(vaddr);
  auto f = index ? func(*index) : std::nullopt;
  auto name = f ? string_at(funcnames_ + f->name_off) : std::nullopt;
  if (!name) return std::nullopt;
  GoPosition pos{std::string(*name), "", 0};
  if (auto line = pc_value(f->pcln, f->entry, vaddr); line && *line > 0) pos.line = *line;
  if (auto fileno = pc_value(f->pcfile, f->entry, vaddr); fileno && *fileno >= 0)
    if (auto file_off = u32(cutab_ + (uint64_t(f->cu) + uint32_t(*fileno)) * 4))
      if (auto file = string_at(filetab_ + *file_off)) pos.file = *file;
  return pos;
}

std::optional<uint64_t> GoPclntab::entry(std::string_view function) const {
  if (by_name_.empty())
    for (uint64_t i = 0; i < nfunc_; ++i)
      if (auto f = func(i))
        if (auto name = string_at(funcnames_ + f->name_off)) by_name_.try_emplace(*name, f->entry);
  auto it = by_name_.find(function);
  return it == by_name_.end() ? std::nullopt : std::optional<uint64_t>(it->second);
}

namespace {

std::span<const uint8_t> section_bytes(Elf_Scn* scn) {
  Elf_Data* data = scn ? elf_getdata(scn, nullptr) : nullptr;
  if (!data || !data->d_buf) return {};
  return {static_cast<const uint8_t*>(data->d_buf), data->d_size};
}

// An externally linked PIE keeps the table in .data.rel.ro, where only its
// header tells it: the first pointer-aligned one that reads as a table.
std::optional<GoPclntab> search_relro(std::span<const uint8_t> relro, uint64_t text) {
  for (size_t at = 0; at + 8 <= relro.size(); at += 8) {
    if (relro[at + 1] != 0xff || relro[at + 2] != 0xff || relro[at + 3] != 0xff) continue;
    if (auto t = GoPclntab::parse(relro.subspan(at), text)) return std::move(*t);
  }
  return std::nullopt;
}

}  // namespace

// The table is .gopclntab (an internally linked PIE: .data.rel.ro.gopclntab),
// or inside .data.rel.ro (an externally linked PIE, cgo's usual build).
Result<GoPclntab> go_pclntab(Elf* e) {
  GElf_Shdr text;
  Elf_Scn* text_scn = find_section(e, ".text");
  if (!text_scn || !gelf_getshdr(text_scn, &text)) return fail("no .text section");
  Elf_Scn* table = find_section(e, ".gopclntab");
  if (!table) table = find_section(e, ".data.rel.ro.gopclntab");
  if (table) return GoPclntab::parse(section_bytes(table), text.sh_addr);
  if (auto found = search_relro(section_bytes(find_section(e, ".data.rel.ro")), text.sh_addr))
    return std::move(*found);
  return fail("no Go pclntab (no .gopclntab section, none in .data.rel.ro)");
}

Result<GoPclntab> go_pclntab(const ElfFile& elf) {
  auto table = go_pclntab(elf.elf());
  if (!table) return fail(elf.path() + ": " + table.error().message);
  return table;
}

}  // namespace allocscope
