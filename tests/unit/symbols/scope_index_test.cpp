// The index of a unit's functions by address against libdw's own walk of
// the unit (dwarf_getscopes), address by address, in real binaries: this
// test binary (GCC, the standard library inlined everywhere), a clang build,
// a dwz-compressed one (partial units, an alternate file), and a pyenv
// libpython where one is installed (an -O3 interpreter loop).
#include "symbols/scope_index.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "symbols/demangle.h"

namespace allocscope {
namespace {

TEST(NestedRanges, TheDeepestHoldingAnAddressWins) {
  NestedRanges r;
  r.add(100, 200, 0, 1);  // a function
  r.add(120, 150, 1, 2);  // a call inlined into it
  r.add(130, 140, 2, 3);  // a call inlined into that
  r.add(160, 170, 1, 4);  // a second call, after the first
  r.add(300, 400, 0, 5);  // another function, after a gap
  r.finish();
  EXPECT_EQ(r.deepest(99), -1);
  EXPECT_EQ(r.deepest(100), 1);
  EXPECT_EQ(r.deepest(125), 2);
  EXPECT_EQ(r.deepest(135), 3);
  EXPECT_EQ(r.deepest(140), 2);  // ends are exclusive
  EXPECT_EQ(r.deepest(155), 1);
  EXPECT_EQ(r.deepest(165), 4);
  EXPECT_EQ(r.deepest(199), 1);
  EXPECT_EQ(r.deepest(250), -1);
  EXPECT_EQ(r.deepest(399), 5);
  EXPECT_EQ(r.deepest(400), -1);
}

TEST(NestedRanges, OfTwoAsDeepTheLaterStartWins) {
  NestedRanges r;
  r.add(0, 100, 1, 7);
  r.add(50, 60, 1, 8);  // malformed DWARF: siblings that overlap
  r.finish();
  EXPECT_EQ(r.deepest(55), 8);
  EXPECT_EQ(r.deepest(70), 7);
  EXPECT_TRUE(NestedRanges().empty());
}

// A binary opened offline, as the symbolizer opens one.
struct Offline {
  explicit Offline(const std::string& path) {
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    dwfl = dwfl_begin(&callbacks);
    mod = dwfl_report_offline(dwfl, "module", path.c_str(), -1);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod) dw = dwfl_module_getdwarf(mod, &bias);
  }
  ~Offline() { dwfl_end(dwfl); }
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  Dwarf* dw = nullptr;
  Dwarf_Addr bias = 0;
};

struct FreeDies {
  void operator()(Dwarf_Die* p) const { std::free(p); }
};

// The chain as libdw's walk finds it: the innermost scope holding pc, then
// that DIE's own parents, function DIEs up to the first not inlined.
std::vector<uint64_t> walked_chain(Dwarf_Die* cu, uint64_t pc) {
  std::vector<uint64_t> chain;
  Dwarf_Die* raw = nullptr;
  int n = dwarf_getscopes(cu, pc, &raw);
  std::unique_ptr<Dwarf_Die, FreeDies> first(raw);
  if (n <= 0) return chain;
  Dwarf_Die innermost = raw[0];
  raw = nullptr;
  n = dwarf_getscopes_die(&innermost, &raw);
  std::unique_ptr<Dwarf_Die, FreeDies> scopes(raw);
  for (int i = 0; i < n; ++i) {
    int tag = dwarf_tag(&raw[i]);
    if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine && tag != DW_TAG_entry_point) continue;
    chain.push_back(dwarf_dieoffset(&raw[i]));
    if (tag != DW_TAG_inlined_subroutine) break;
  }
  return chain;
}

std::vector<uint64_t> indexed_chain(const UnitScopes& scopes, uint64_t pc) {
  std::vector<uint64_t> chain;
  for (Dwarf_Die die : scopes.chain(pc)) chain.push_back(dwarf_dieoffset(&die));
  return chain;
}

struct Compared {
  size_t addresses = 0, inlined = 0, beyond = 0, differ = 0;
};

// The symbol table's name for a module address: what a chain libdw's walk does not find
// must end in.
std::string symbol_at(Dwfl_Module* mod, uint64_t pc) {
  const char* name = dwfl_module_addrname(mod, pc);
  return name ? name : "";
}

// Whether the symbol names the function DIE (a lambda's body has a name,
// "operator()", but no linkage name).
bool names(const std::string& symbol, Dwarf_Die die) {
  Dwarf_Attribute attr;
  const char* name = dwarf_formstring(dwarf_attr_integrate(&die, DW_AT_name, &attr));
  return name && demangle(symbol).find(name) != std::string::npos;
}

// Up to `per_unit` addresses spread over each unit's code. libdw's walk
// does not enter types, so it misses functions defined in a class defined
// in a function (a lambda's body): there the index must name the symbol.
Compared compare_units(const Offline& file, size_t per_unit) {
  Compared c;
  Dwarf_CU* cu = nullptr;
  Dwarf_Die unit;
  uint8_t type = 0;
  while (dwarf_get_units(file.dw, cu, &cu, nullptr, &type, &unit, nullptr) == 0) {
    if (type != DW_UT_compile) continue;
    UnitScopes scopes(&unit);
    Dwarf_Addr base, start, end;
    uint64_t size = 0;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(&unit, off, &base, &start, &end)) > 0;) size += end - start;
    uint64_t step = std::max<uint64_t>(1, size / per_unit) | 1;  // odd: not always an instruction's start
    for (ptrdiff_t off = 0; (off = dwarf_ranges(&unit, off, &base, &start, &end)) > 0;) {
      if (start == 0) continue;  // code the linker discarded
      for (uint64_t pc = start; pc < end; pc += step) {
        std::vector<uint64_t> want = walked_chain(&unit, pc), got = indexed_chain(scopes, pc);
        ++c.addresses;
        c.inlined += want.size() > 1;
        if (want.empty() && !got.empty() &&
            names(symbol_at(file.mod, pc + file.bias), scopes.chain(pc).back())) {
          ++c.beyond;
          continue;
        }
        if (got != want && ++c.differ <= 5)
          ADD_FAILURE() << "at 0x" << std::hex << pc << std::dec << ": " << want.size() << " scopes walked, "
                        << got.size() << " indexed";
      }
    }
  }
  return c;
}

void expect_same_chains(const std::string& path, size_t per_unit) {
  SCOPED_TRACE(path);
  Offline file(path);
  ASSERT_NE(file.dw, nullptr) << "no DWARF";
  Compared c = compare_units(file, per_unit);
  std::cerr << "[ scopes   ] " << path << ": " << c.addresses << " addresses, " << c.inlined
            << " in inlined calls, " << c.beyond << " in functions libdw's walk misses\n";
  EXPECT_GT(c.inlined, 0u);  // else the comparison would prove little
  EXPECT_EQ(c.differ, 0u);
}

TEST(UnitScopes, FindTheChainsLibdwsWalkFindsInThisTestsOwnCode) { expect_same_chains("/proc/self/exe", 30); }

TEST(UnitScopes, FindTheChainsLibdwsWalkFindsInAClangBuild) { expect_same_chains(INLINED_CLANG_BIN, 4000); }

// dwz moves shared DIEs into partial units, some into a file of their own.
TEST(UnitScopes, FindTheChainsLibdwsWalkFindsInADwzCompressedFile) { expect_same_chains(DWZ_BIN, 2000); }

TEST(UnitScopes, FindTheChainsLibdwsWalkFindsInAnInterpretersLoop) {
  std::string root = std::getenv("HOME") ? std::string(std::getenv("HOME")) + "/.pyenv/versions" : "";
  std::error_code ec;
  std::string found;
  for (const auto& v : std::filesystem::directory_iterator(root, ec))
    if (std::filesystem::exists(v.path() / "lib/libpython3.12.so.1.0"))
      found = v.path() / "lib/libpython3.12.so.1.0";
  if (found.empty()) GTEST_SKIP() << "no pyenv libpython3.12 here";
  expect_same_chains(found, 25);
}

}  // namespace
}  // namespace allocscope
