// Which allocator entry points get a uprobe: symbol selection on made-up
// symbol tables, then the whole lookup on this machine's own C library.
#include "probe/placement/allocator_probes.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "host/proc_maps.h"
#include "probe/placement/allocator_entries.h"

namespace allocscope {
namespace {

const ProbeTarget* target_for(const std::vector<ProbeTarget>& targets, as_fn fn) {
  auto it = std::find_if(targets.begin(), targets.end(), [&](const ProbeTarget& t) { return t.fn == fn; });
  return it == targets.end() ? nullptr : &*it;
}

TEST(FnName, EveryEntryPoint) {
  EXPECT_STREQ(as_fn_name(AS_FN_MALLOC), "malloc");
  EXPECT_STREQ(as_fn_name(AS_FN_CALLOC), "calloc");
  EXPECT_STREQ(as_fn_name(AS_FN_REALLOC), "realloc");
  EXPECT_STREQ(as_fn_name(AS_FN_REALLOCARRAY), "reallocarray");
  EXPECT_STREQ(as_fn_name(AS_FN_POSIX_MEMALIGN), "posix_memalign");
  EXPECT_STREQ(as_fn_name(AS_FN_ALIGNED_ALLOC), "aligned_alloc");
  EXPECT_STREQ(as_fn_name(AS_FN_MEMALIGN), "memalign");
  EXPECT_STREQ(as_fn_name(AS_FN_VALLOC), "valloc");
  EXPECT_STREQ(as_fn_name(AS_FN_PVALLOC), "pvalloc");
  EXPECT_STREQ(as_fn_name(AS_FN_FREE), "free");
  EXPECT_STREQ(as_fn_name(AS_FN_EXIT), "_exit");  // the C library's only: CPython processes held there
  EXPECT_STREQ(as_fn_name(AS_FN_GO_MALLOC), "runtime.mallocgc");
  EXPECT_STREQ(as_fn_name(AS_FN_GO_PROFILE), "runtime.mProf_Malloc");
  EXPECT_STREQ(as_fn_name(AS_FN_GO_FREE), "runtime.freeSpecial");
  EXPECT_STREQ(as_fn_name(-1), "?");
  EXPECT_STREQ(as_fn_name(AS_FN_COUNT), "?");
}

// The C library's entry points: Go's runtime.mallocgc is no C library's.
TEST(SelectAllocatorSymbols, AllEntryPointsInEnumOrder) {
  std::vector<ElfSymbol> symbols;
  for (int fn = AS_FN_COUNT - 1; fn >= 0; --fn)  // reverse order on purpose
    symbols.push_back({as_fn_name(fn), 0x1000 + 0x100 * uint64_t(fn), 64});
  std::vector<ProbeTarget> targets = select_allocator_symbols(symbols, true);
  ASSERT_EQ(targets.size(), size_t(AS_FN_EXIT + 1));
  for (int fn = 0; fn <= AS_FN_EXIT; ++fn) {
    EXPECT_EQ(targets[fn].fn, fn);
    EXPECT_EQ(targets[fn].vaddr, 0x1000 + 0x100 * uint64_t(fn));
    EXPECT_EQ(targets[fn].offset, 0u);  // file offsets are find_allocator_probes' job
  }
}

TEST(SelectAllocatorSymbols, AliasesAttachOnceKeepingTheFirstInEnumOrder) {
  // glibc before 2.38: aligned_alloc is an alias of memalign. Probing both
  // would count each call twice.
  std::vector<ElfSymbol> symbols = {
      {"memalign", 0x5000, 32}, {"free", 0x2000, 32}, {"aligned_alloc", 0x5000, 32}, {"malloc", 0x1000, 32}};
  std::vector<ProbeTarget> targets = select_allocator_symbols(symbols, true);
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets[0].fn, AS_FN_MALLOC);
  EXPECT_EQ(targets[1].fn, AS_FN_ALIGNED_ALLOC);
  EXPECT_EQ(targets[1].vaddr, 0x5000u);
  EXPECT_EQ(targets[2].fn, AS_FN_FREE);
  EXPECT_EQ(target_for(targets, AS_FN_MEMALIGN), nullptr);
}

TEST(SelectAllocatorSymbols, UnknownNamesIgnoredMissingOnesSkipped) {
  std::vector<ElfSymbol> symbols = {{"__libc_malloc", 0x1000, 32},  // internal alias of malloc, listed first
                                    {"malloc_usable_size", 0x3000, 32},
                                    {"Malloc", 0x4000, 32},
                                    {"my_alloc", 0x6000, 32},
                                    {"malloc", 0x1000, 32},
                                    {"malloc", 0x1000, 32},  // once from .symtab, once from .dynsym
                                    {"free", 0x2000, 32}};
  std::vector<ProbeTarget> targets = select_allocator_symbols(symbols, true);
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].fn, AS_FN_MALLOC);
  EXPECT_EQ(targets[0].vaddr, 0x1000u);
  EXPECT_EQ(targets[1].fn, AS_FN_FREE);
  EXPECT_EQ(targets[1].vaddr, 0x2000u);
  EXPECT_TRUE(select_allocator_symbols({}, true).empty());
}

// Outside the C library, every known entry point carries its own code, so
// the leaf frame says which was called; aliases are probed once, under the
// standard name.
TEST(SelectAllocatorSymbols, OtherAllocatorsNameEachEntryPoint) {
  std::vector<ElfSymbol> symbols = {{"tc_malloc", 0x1000, 32}, {"malloc", 0x1000, 32},  // tcmalloc's aliases
                                    {"tc_new", 0x2000, 32},    {"_Znwm", 0x2000, 32},
                                    {"tc_free", 0x3000, 32},   {"_ZdlPv", 0x3000, 32},
                                    {"free", 0x3000, 32},      {"_ZdlPvm", 0x3100, 32},
                                    {"mallocx", 0x4000, 32},   {"xallocx", 0x5000, 32},  // not an allocation
                                    {"mi_calloc", 0x6000, 32}, {"malloc_usable_size", 0x7000, 32},
                                    {"_exit", 0x8000, 32}};  // the C library's alone
  std::vector<ProbeTarget> targets = select_allocator_symbols(symbols, false);
  std::map<uint64_t, std::pair<std::string, as_fn>> by_address;
  for (const ProbeTarget& t : targets) by_address[t.vaddr] = {entry_name(t.fn), as_fn_kind(t.fn)};
  ASSERT_EQ(targets.size(), 6u);
  EXPECT_EQ(by_address[0x1000], std::make_pair(std::string("malloc"), AS_FN_MALLOC));
  EXPECT_EQ(by_address[0x2000], std::make_pair(std::string("operator new(unsigned long)"), AS_FN_MALLOC));
  EXPECT_EQ(by_address[0x3000], std::make_pair(std::string("free"), AS_FN_FREE));
  EXPECT_EQ(by_address[0x3100],
            std::make_pair(std::string("operator delete(void*, unsigned long)"), AS_FN_FREE));
  EXPECT_EQ(by_address[0x4000], std::make_pair(std::string("mallocx"), AS_FN_MALLOC));
  EXPECT_EQ(by_address[0x6000], std::make_pair(std::string("mi_calloc"), AS_FN_CALLOC));
  for (const ProbeTarget& t : targets) EXPECT_NE(t.fn >> AS_FN_ENTRY_SHIFT, 0) << entry_name(t.fn);
}

// libstdc++ defines operator new but allocates through malloc: probing it
// too would only add traps.
TEST(SelectAllocatorSymbols, ObjectsWithoutAMallocAreNoAllocators) {
  EXPECT_TRUE(select_allocator_symbols({{"_Znwm", 0x1000, 32}, {"_ZdlPv", 0x2000, 32}}, false).empty());
  EXPECT_FALSE(select_allocator_symbols({{"mi_malloc", 0x1000, 32}}, false).empty());
  EXPECT_FALSE(select_allocator_symbols({{"je_malloc", 0x1000, 32}}, false).empty());
}

// The C library this test process runs on, as the recorder finds a target's.
std::string own_c_library(std::vector<Mapping>* maps_out = nullptr) {
  std::ifstream in("/proc/self/maps");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<Mapping> maps = parse_maps(text);
  const Mapping* libc = find_c_library(maps);
  std::string path = libc ? libc->path : "";
  if (maps_out) *maps_out = std::move(maps);
  return path;
}

TEST(FindAllocatorProbes, OwnCLibrary) {
  std::vector<Mapping> maps;
  std::string path = own_c_library(&maps);
  ASSERT_FALSE(path.empty()) << "no C library in /proc/self/maps";
  auto targets = find_allocator_probes(path);
  ASSERT_TRUE(targets.has_value()) << targets.error();
  ASSERT_NE(target_for(*targets, AS_FN_MALLOC), nullptr);
  ASSERT_NE(target_for(*targets, AS_FN_FREE), nullptr);

  std::set<uint64_t> offsets, fns;
  for (const ProbeTarget& t : *targets) {
    EXPECT_NE(t.offset, 0u) << as_fn_name(t.fn);
    EXPECT_TRUE(offsets.insert(t.offset).second) << as_fn_name(t.fn) << " shares an offset";
    EXPECT_TRUE(fns.insert(t.fn).second) << as_fn_name(t.fn) << " listed twice";
    // Every probe lands in code this process has mapped executable.
    bool in_text = std::any_of(maps.begin(), maps.end(), [&](const Mapping& m) {
      return m.executable && m.path == path && t.offset >= m.offset &&
             t.offset < m.offset + (m.end - m.start);
    });
    EXPECT_TRUE(in_text) << as_fn_name(t.fn) << " at offset " << std::hex << t.offset;
  }

  // The offset is where the function really is: the running malloc's address
  // maps back to it through /proc/self/maps (unless something interposes it).
  for (as_fn fn : {AS_FN_MALLOC, AS_FN_FREE, AS_FN_CALLOC, AS_FN_REALLOC}) {
    const ProbeTarget* t = target_for(*targets, fn);
    ASSERT_NE(t, nullptr) << as_fn_name(fn);
    uint64_t addr = reinterpret_cast<uint64_t>(dlsym(RTLD_DEFAULT, as_fn_name(fn)));
    const Mapping* m = find_mapping(maps, addr);
    if (!m || m->path != path) continue;  // e.g. a preloaded allocator
    EXPECT_EQ(m->file_offset(addr) + t->placed_at, t->offset) << as_fn_name(fn);
    if (fn != AS_FN_FREE) {
      EXPECT_EQ(t->placed_at, 0u) << as_fn_name(fn) << ": return probes need the entry";
    }
  }
}

// Each entry point the library defines is either probed or shares its address
// with one that is, so no call goes uncounted and none is counted twice.
TEST(FindAllocatorProbes, OwnCLibraryCoversEveryDefinedEntryPoint) {
  std::string path = own_c_library();
  ASSERT_FALSE(path.empty());
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf.has_value()) << elf.error();
  std::vector<ElfSymbol> symbols = elf->functions();
  auto targets = find_allocator_probes(path);
  ASSERT_TRUE(targets.has_value()) << targets.error();
  for (int fn = 0; fn < AS_FN_COUNT; ++fn) {
    auto sym = std::find_if(symbols.begin(), symbols.end(),
                            [&](const ElfSymbol& s) { return s.name == as_fn_name(fn); });
    if (sym == symbols.end()) {
      EXPECT_EQ(target_for(*targets, as_fn(fn)), nullptr) << as_fn_name(fn);
      continue;
    }
    bool covered = std::any_of(targets->begin(), targets->end(), [&](const ProbeTarget& t) {
      return t.vaddr == sym->vaddr && t.fn <= fn;  // itself, or an alias earlier in enum order
    });
    EXPECT_TRUE(covered) << as_fn_name(fn);
  }
}

class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    std::string pattern = ::testing::TempDir() + "allocscope_probe_XXXXXX";
    path_.assign(pattern.begin(), pattern.end());
    path_.push_back('\0');
    int fd = mkstemp(path_.data());
    EXPECT_GE(fd, 0);
    if (fd >= 0) {
      EXPECT_EQ(write(fd, content.data(), content.size()), ssize_t(content.size()));
      close(fd);
    }
    path_.pop_back();
  }
  ~TempFile() { unlink(path().c_str()); }
  std::string path() const { return std::string(path_.begin(), path_.end()); }

 private:
  std::vector<char> path_;
};

TEST(FindAllocatorProbes, NonElfFileIsAnError) {
  for (const std::string& content : {std::string("just some text\n"), std::string()}) {
    TempFile file(content);
    auto targets = find_allocator_probes(file.path());
    ASSERT_FALSE(targets.has_value());
    EXPECT_NE(targets.error().message.find(file.path()), std::string::npos) << targets.error();
    EXPECT_NE(targets.error().message.find("not an ELF"), std::string::npos) << targets.error();
    EXPECT_EQ(targets.error().cause, Cause::NotElf);  // code in a memfd (a JIT's) is no allocator: skipped
  }
}

TEST(FindAllocatorProbes, MissingFileErrorNamesThePath) {
  const std::string path = "/nonexistent-allocscope-dir/libc.so.6";
  auto targets = find_allocator_probes(path);
  ASSERT_FALSE(targets.has_value());
  EXPECT_NE(targets.error().message.find(path), std::string::npos) << targets.error();
  EXPECT_NE(targets.error().message.find("No such file"), std::string::npos) << targets.error();
  EXPECT_EQ(targets.error().code, ENOENT);  // typed: callers need not match the text
}

TEST(FindAllocatorProbes, ElfWithoutMallocIsAnError) {
  // A workload that calls malloc but does not define it (not this test
  // program: under clang's ASan its runtime, linked in, defines malloc).
  std::string path = OTEL_PROVIDER_BIN;
  auto targets = find_allocator_probes(path);
  ASSERT_FALSE(targets.has_value());
  EXPECT_NE(targets.error().message.find(path), std::string::npos) << targets.error();
  EXPECT_NE(targets.error().message.find("no malloc"), std::string::npos) << targets.error();
  EXPECT_EQ(targets.error().cause, Cause::NoAllocator);  // not an allocator: skipped without a warning
}

}  // namespace
}  // namespace allocscope
