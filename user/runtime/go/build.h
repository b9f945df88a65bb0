// Which Go toolchain built a program, from the build information Go's
// linker leaves in it (.go.buildinfo, which strip keeps). Go programs
// allocate from their own heap (runtime.mallocgc), not through malloc: a
// recording must say so rather than call them stripped.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace allocscope {

class ElfFile;

struct GoBuild {
  std::string version;  // "go1.19.8"; "" for Go 1.17 and older, whose header points elsewhere
};

// Go's unsigned varint (binary.Uvarint) at *at, which it moves past;
// nullopt past the end or 64 bits.
std::optional<uint64_t> go_uvarint(std::span<const uint8_t> bytes, size_t* at);

// The build information's bytes, from its 16-byte-aligned magic; nullopt
// when they are not Go's. Pure.
std::optional<GoBuild> parse_go_buildinfo(std::span<const uint8_t> bytes);

// The file's Go build, or nullopt when it is not a Go program (or its
// section headers are gone).
std::optional<GoBuild> go_build(const ElfFile& elf);

}  // namespace allocscope
