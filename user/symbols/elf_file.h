// An ELF file read through elfutils' libelf: function symbols and the
// mapping between virtual addresses and file offsets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "host/files.h"

typedef struct Elf Elf;
typedef struct Elf_Scn Elf_Scn;

namespace allocscope {

struct ElfSymbol {
  std::string name;
  uint64_t vaddr = 0;
  uint64_t size = 0;
};

// The section of that name with bytes in the file (not SHT_NOBITS), or null.
Elf_Scn* find_section(Elf* elf, const char* name);

// ElfFile::largest_inflated_section of an ELF libelf has open (libdwfl's).
uint64_t largest_inflated_section(Elf* elf);

class ElfFile {
 public:
  static Result<ElfFile> open(const std::string& path);

  // Defined functions from .symtab and .dynsym, default versions only.
  std::vector<ElfSymbol> functions() const;
  // Defined data objects (variables), likewise.
  std::vector<ElfSymbol> objects() const;
  // The lowest virtual address of an executable PT_LOAD segment (what the
  // kernel takes, plus the load bias, as a process's start_code).
  Result<uint64_t> exec_vaddr() const;
  // The program's interpreter (PT_INTERP): "" for a static program or a
  // library.
  std::string interpreter() const;
  // File offset of a virtual address inside a PT_LOAD segment, and back.
  Result<uint64_t> vaddr_to_offset(uint64_t vaddr) const;
  Result<uint64_t> offset_to_vaddr(uint64_t offset) const;
  // Up to n bytes of the file at offset; n at most kMaxRead (the file's
  // own sizes are not trusted to size a buffer).
  static constexpr size_t kMaxRead = size_t{1} << 20;
  Result<std::vector<uint8_t>> read(uint64_t offset, size_t n) const;
  // The most bytes one of its compressed sections (SHF_COMPRESSED, or
  // GNU's .zdebug) says it inflates to: libdw inflates a section whole
  // when it first reads it.
  uint64_t largest_inflated_section() const;
  // The opened file's device and inode (what it is, whatever the path).
  Result<FileIdentity> identity() const;
  // PT_LOAD segments: file offset, virtual address, bytes in the file.
  struct Segment {
    uint64_t offset = 0, vaddr = 0, size = 0;
  };
  std::vector<Segment> segments() const;
  Elf* elf() const { return elf_.get(); }
  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(Elf* e) const;
  };
  ElfFile(UniqueFd fd, Elf* elf, std::string path);
  std::vector<ElfSymbol> symbols(bool objects) const;
  UniqueFd fd_;  // declared first: elf_ is ended before its file is closed
  std::unique_ptr<Elf, Closer> elf_;
  std::string path_;
};

}  // namespace allocscope
