// The bounds on what a binary's own sizes make allocscope take: a read of
// the file, and a compressed debug section libdw would inflate whole.
#include "symbols/elf_file.h"

#include <gelf.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "temp_dir.h"

namespace allocscope {
namespace {

// /bin/true with a 1 MiB debug section of zeros, compressed by objcopy.
std::string with_compressed_section(const TempDir& dir) {
  std::string zeros = (dir.path / "zeros").string(), out = (dir.path / "true.debug").string();
  std::ofstream(zeros) << std::string(1 << 20, '\0');
  // Two steps: objcopy compresses before it adds.
  std::string cmd = "objcopy --add-section .debug_str=" + zeros + " /bin/true " + out +
                    " && objcopy --compress-debug-sections=zlib " + out;
  return std::system(cmd.c_str()) == 0 ? out : "";
}

// Writes `size` as the compressed section's header says it inflates to.
bool claim_size(const std::string& path, uint64_t size) {
  auto elf = ElfFile::open(path);
  if (!elf) return false;
  uint64_t at = 0;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf->elf(), scn));) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && (shdr.sh_flags & SHF_COMPRESSED)) at = shdr.sh_offset;
  }
  if (!at) return false;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(at + offsetof(Elf64_Chdr, ch_size)));
  f.write(reinterpret_cast<const char*>(&size), sizeof size);
  return bool(f);
}

TEST(ElfFile, ACompressedSectionIsMeasuredByItsHeaderBeforeAnythingInflatesIt) {
  TempDir dir;
  std::string path = with_compressed_section(dir);
  ASSERT_FALSE(path.empty()) << "objcopy failed";
  {
    auto elf = ElfFile::open(path);
    ASSERT_TRUE(elf) << elf.error();
    EXPECT_EQ(elf->largest_inflated_section(), uint64_t{1} << 20);
  }
  ASSERT_TRUE(claim_size(path, uint64_t{3} << 30));
  auto elf = ElfFile::open(path);
  ASSERT_TRUE(elf) << elf.error();
  EXPECT_EQ(elf->largest_inflated_section(), uint64_t{3} << 30) << "a bomb's claim, read without inflating";
  auto plain = ElfFile::open("/bin/true");
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_EQ(plain->largest_inflated_section(), 0u);
}

// A read is sized by the caller, never beyond 1 MiB: a size taken from the
// file (a segment's, a section's) cannot ask for gigabytes.
TEST(ElfFile, AReadOverItsBoundIsRefusedBeforeTheBufferIsMade) {
  auto elf = ElfFile::open("/bin/true");
  ASSERT_TRUE(elf) << elf.error();
  auto over = elf->read(0, ElfFile::kMaxRead + 1);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, EFBIG);
  auto within = elf->read(0, 64);
  ASSERT_TRUE(within) << within.error();
  EXPECT_EQ(within->size(), 64u);
  EXPECT_EQ((*within)[1], 'E');
}

}  // namespace
}  // namespace allocscope
