// libFuzzer: an ELF file a traced process maps, as allocscope reads it:
// symbols and segments (libelf), call frame information compiled into
// unwind rows (libdw), the in-process probe notes, and the placement of an
// allocator probe in the bytes at a symbol.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "probe/placement/probe_placement.h"
#include "probe/placement/usdt_notes.h"
#include "runtime/registry.h"
#include "symbols/elf_file.h"
#include "symbols/unwind_table.h"

using namespace allocscope;

namespace {

// Kept in plain storage: the exit handler runs after static strings are gone.
char removed_at_exit[4096];

void remove_input() { unlink(removed_at_exit); }

// One private file, rewritten for each input (the readers take paths), and
// removed when the fuzzer exits.
const std::string& input_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string t = std::string(dir && *dir ? dir : "/tmp") + "/allocscope-fuzz-elf-XXXXXX";
    if (t.size() >= sizeof removed_at_exit) std::abort();
    int fd = mkstemp(t.data());
    if (fd < 0) std::abort();
    close(fd);
    t.copy(removed_at_exit, t.size());
    std::atexit(remove_input);
    return t;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) std::abort();
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += size_t(n);
  }
  close(fd);
  (void)has_in_process_probes(path);
  auto elf = ElfFile::open(path);
  if (!elf) return 0;
  auto table = build_unwind_table(*elf, runtime_tables_readers());
  if (table && !table->rows.empty()) {
    (void)find_row(table->rows, table->rows.back().pc + 1);
    (void)kernel_layout(table->rows);
  }
  int placed = 0;
  for (const ElfSymbol& s : elf->functions()) {
    auto offset = elf->vaddr_to_offset(s.vaddr);
    if (!offset) continue;
    auto code = elf->read(*offset, 256);
    if (code) (void)place_probe(*code, s.vaddr, false);
    if (++placed == 16) break;
  }
  return 0;
}
