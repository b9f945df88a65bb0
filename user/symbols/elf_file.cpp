#include "symbols/elf_file.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "host/files.h"

namespace allocscope {

void ElfFile::Closer::operator()(Elf* e) const { elf_end(e); }

ElfFile::ElfFile(UniqueFd fd, Elf* elf, std::string path)
    : fd_(std::move(fd)), elf_(elf), path_(std::move(path)) {}

Result<ElfFile> ElfFile::open(const std::string& path) {
  elf_version(EV_CURRENT);
  auto opened = open_binary(path);
  if (!opened) return fail(opened.error());
  UniqueFd fd = std::move(*opened);
  std::unique_ptr<Elf, Closer> elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF)
    return fail("read " + path + ": not an ELF file", Cause::NotElf);
  return ElfFile(std::move(fd), elf.release(), path);
}

std::string ElfFile::interpreter() const {
  size_t n = 0;
  if (elf_getphdrnum(elf_.get(), &n) != 0) return "";
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf_.get(), int(i), &ph) || ph.p_type != PT_INTERP || ph.p_filesz > 4096) continue;
    auto bytes = read(ph.p_offset, ph.p_filesz);
    if (bytes) return std::string(bytes->begin(), std::find(bytes->begin(), bytes->end(), uint8_t(0)));
  }
  return "";
}

namespace {

// Functions (or data objects) of one table; versym (may be null) marks
// non-default versions.
void collect(Elf* elf, Elf_Scn* scn, const GElf_Shdr& shdr, Elf_Data* versym, bool objects,
             std::vector<ElfSymbol>& out) {
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (!data || shdr.sh_entsize == 0) return;
  size_t n = shdr.sh_size / shdr.sh_entsize;
  for (size_t i = 0; i < n; ++i) {
    GElf_Sym sym;
    if (!gelf_getsym(data, int(i), &sym) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (objects ? type != STT_OBJECT : type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    GElf_Versym ver;
    if (versym && gelf_getversym(versym, int(i), &ver) && (ver & 0x8000))
      continue;  // hidden: an old compatibility version, not what programs bind to
    const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
    if (name && *name) out.push_back({name, sym.st_value, sym.st_size});
  }
}

}  // namespace

std::vector<ElfSymbol> ElfFile::functions() const { return symbols(false); }

std::vector<ElfSymbol> ElfFile::objects() const { return symbols(true); }

std::vector<ElfSymbol> ElfFile::symbols(bool objects) const {
  std::vector<ElfSymbol> out;
  Elf_Data* versym = nullptr;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf_.get(), scn));) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym) versym = elf_getdata(scn, nullptr);
  }
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf_.get(), scn));) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) continue;
    if (shdr.sh_type == SHT_DYNSYM)
      collect(elf_.get(), scn, shdr, versym, objects, out);
    else if (shdr.sh_type == SHT_SYMTAB)
      collect(elf_.get(), scn, shdr, nullptr, objects, out);
  }
  return out;
}

Result<uint64_t> ElfFile::vaddr_to_offset(uint64_t vaddr) const {
  for (const Segment& seg : segments())
    if (vaddr >= seg.vaddr && vaddr < seg.vaddr + seg.size) return vaddr - seg.vaddr + seg.offset;
  return fail("read " + path_ + ": address outside loadable segments");
}

Result<uint64_t> ElfFile::offset_to_vaddr(uint64_t offset) const {
  for (const Segment& seg : segments())
    if (offset >= seg.offset && offset < seg.offset + seg.size) return offset - seg.offset + seg.vaddr;
  return fail("read " + path_ + ": offset outside loadable segments");
}

Result<FileIdentity> ElfFile::identity() const {
  struct stat st;
  if (fstat(fd_.get(), &st) != 0) return fail_errno("stat " + path_, errno);
  return FileIdentity{major(st.st_dev), minor(st.st_dev), st.st_ino};
}

std::vector<ElfFile::Segment> ElfFile::segments() const {
  std::vector<Segment> out;
  size_t n = 0;
  if (elf_getphdrnum(elf_.get(), &n) != 0) return out;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf_.get(), int(i), &ph) && ph.p_type == PT_LOAD)
      out.push_back({ph.p_offset, ph.p_vaddr, ph.p_filesz});
  }
  return out;
}

Result<uint64_t> ElfFile::exec_vaddr() const {
  size_t n = 0;
  if (elf_getphdrnum(elf_.get(), &n) != 0) return fail("read " + path_ + ": no program headers");
  uint64_t lowest = UINT64_MAX;
  for (size_t i = 0; i < n; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf_.get(), int(i), &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
      lowest = std::min<uint64_t>(lowest, ph.p_vaddr);
  }
  if (lowest == UINT64_MAX) return fail("read " + path_ + ": no executable segment");
  return lowest;
}

}  // namespace allocscope

namespace allocscope {

Result<std::vector<uint8_t>> ElfFile::read(uint64_t offset, size_t n) const {
  if (n > kMaxRead)
    return fail("read " + path_ + ": " + std::to_string(n) + " bytes asked, over 1 MiB", EFBIG);
  std::vector<uint8_t> bytes(n);
  ssize_t got = pread(fd_.get(), bytes.data(), n, off_t(offset));
  if (got < 0) return fail_errno("read " + path_, errno);
  bytes.resize(size_t(got));
  return bytes;
}

}  // namespace allocscope

namespace allocscope {

Elf_Scn* find_section(Elf* elf, const char* name) {
  size_t strndx;
  if (!elf || elf_getshdrstrndx(elf, &strndx) != 0) return nullptr;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    const char* n = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, strndx, shdr.sh_name) : nullptr;
    if (n && std::strcmp(n, name) == 0 && shdr.sh_type != SHT_NOBITS) return scn;
  }
  return nullptr;
}

uint64_t largest_inflated_section(Elf* elf) {
  size_t strings = 0;
  if (!elf || elf_getshdrstrndx(elf, &strings) != 0) return 0;
  uint64_t largest = 0;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS) continue;
    uint64_t size = 0;
    if (shdr.sh_flags & SHF_COMPRESSED) {
      GElf_Chdr chdr;
      if (gelf_getchdr(scn, &chdr)) size = chdr.ch_size;
    } else if (const char* name = elf_strptr(elf, strings, shdr.sh_name);
               name && std::strncmp(name, ".zdebug", 7) == 0) {
      // "ZLIB" and the inflated size, 8 bytes big-endian.
      Elf_Data* raw = elf_rawdata(scn, nullptr);
      if (raw && raw->d_size >= 12 && std::memcmp(raw->d_buf, "ZLIB", 4) == 0)
        for (int i = 4; i < 12; ++i) size = size << 8 | static_cast<const uint8_t*>(raw->d_buf)[i];
    }
    largest = std::max(largest, size);
  }
  return largest;
}

uint64_t ElfFile::largest_inflated_section() const {
  return allocscope::largest_inflated_section(elf_.get());
}

}  // namespace allocscope
