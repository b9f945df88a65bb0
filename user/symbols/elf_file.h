// An ELF file read through elfutils' libelf: function symbols and the
// mapping between virtual addresses and file offsets.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

typedef struct Elf Elf;

namespace allocscope {

struct ElfSymbol {
  std::string name;
  uint64_t vaddr = 0;
  uint64_t size = 0;
};

class ElfFile {
 public:
  static Result<ElfFile> open(const std::string& path);

  // Defined functions from .symtab and .dynsym, default versions only.
  std::vector<ElfSymbol> functions() const;
  // The program's interpreter (PT_INTERP): "" for a static program or a
  // library.
  std::string interpreter() const;
  // File offset of a virtual address inside a PT_LOAD segment.
  Result<uint64_t> vaddr_to_offset(uint64_t vaddr) const;
  // Up to n bytes of the file at offset.
  Result<std::vector<uint8_t>> read(uint64_t offset, size_t n) const;
  Elf* elf() const { return elf_.get(); }
  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(Elf* e) const;
  };
  ElfFile(UniqueFd fd, Elf* elf, std::string path);
  UniqueFd fd_;  // declared first: elf_ is ended before its file is closed
  std::unique_ptr<Elf, Closer> elf_;
  std::string path_;
};

}  // namespace allocscope
