#include "inject/injector.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include <cstring>
#include <thread>

#include "host/preload_library.h"
#include "host/process.h"
#include "inject/seccomp_check.h"
#include "inject/target_code.h"
#include "inject/thread_choice.h"
#include "symbols/elf_file.h"

namespace allocscope::inject {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kRingName[] = "allocscope-frees", kSeedName[] = "allocscope-seed";
constexpr int kRounds = 20;  // passes over the threads: a running one is caught in its own code
constexpr uint64_t kLoaderStack = 256 << 10;

std::string process_name(pid_t pid) { return "process " + std::to_string(pid); }

std::vector<uint8_t> bytes_of(const std::string& s) {
  std::vector<uint8_t> v(s.begin(), s.end());
  v.push_back(0);
  return v;
}

template <typename T>
std::vector<uint8_t> bytes_of(const T& value) {
  std::vector<uint8_t> v(sizeof value);
  std::memcpy(v.data(), &value, sizeof value);
  return v;
}

uint64_t status_mask(std::string_view status, std::string_view key) {
  size_t at = status.find(key);
  if (at == std::string_view::npos) return 0;
  return std::strtoull(std::string(status.substr(at + key.size(), 20)).c_str(), nullptr, 16);
}

// A signal the program catches is pending and not blocked for the thread.
bool signal_waits(pid_t pid, pid_t tid) {
  auto status = read_text_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  if (!status) return true;  // unknown: the EINTR stands
  uint64_t pending = status_mask(*status, "SigPnd:") | status_mask(*status, "ShdPnd:");
  return (pending & ~status_mask(*status, "SigBlk:") & status_mask(*status, "SigCgt:")) != 0;
}

Borrowing borrowing_for(pid_t pid, pid_t tid, const TargetCode& code) {
  Borrowing b;
  b.fits = [&code](const user_regs_struct& r) {
    if (stopped_in_allocator_syscall(r)) return false;
    if (stop_place(r) != StopPlace::UserCode) return true;  // in a system call's wrapper, not mid-allocator
    for (auto [lo, hi] : code.no_calls_from)
      if (r.rip >= lo && r.rip < hi) return false;
    return true;
  };
  b.signal_waits = [pid, tid] { return signal_waits(pid, tid); };
  b.errno_tpoff = code.errno_tpoff;
  // A thread's stack (not the main one's, which grows) must leave the
  // dynamic loader room below the call's frame.
  b.stack_low = [&code](uint64_t sp) -> uint64_t {
    const Mapping* m = find_mapping(code.maps, sp);
    if (!m || !m->writable || m->is_file()) return 0;
    return m->path == "[stack]" || sp - m->start >= kLoaderStack ? m->start : 0;
  };
  return b;
}

// A thread of the process, stopped where a call may be made from.
Result<RemoteThread> borrow_thread(pid_t pid, const TargetCode& code, Clock::time_point deadline) {
  Error last{process_name(pid) + " has no thread to borrow", EAGAIN};
  for (int round = 0; round < kRounds && Clock::now() < deadline; ++round) {
    for (pid_t tid : borrowing_order(read_threads(pid))) {
      auto t = RemoteThread::take(pid, tid, code.gadgets, borrowing_for(pid, tid, code), deadline);
      if (t) return t;
      last = t.error();
      if (last.code == ESRCH && !process_exists(pid)) return fail(process_name(pid) + " exited", ESRCH);
      if (last.code == EPERM) return fail(last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + round));
  }
  return fail(last);
}

Result<long> remote_syscall(RemoteThread& t, long nr, std::array<uint64_t, 6> args, std::vector<uint8_t> data,
                            Clock::time_point deadline) {
  auto r = t.run(Call{.syscall = nr, .args = args, .data = std::move(data)}, deadline);
  if (!r) return fail(r.error());
  return r->syscall_result;
}

// The target's memfd `name` created, and opened here.
Result<std::pair<int, UniqueFd>> remote_memfd(RemoteThread& t, pid_t pid, const char* name,
                                              Clock::time_point deadline) {
  auto data = bytes_of(std::string(name));
  auto fd = remote_syscall(t, SYS_memfd_create, {t.data_address(data.size()), MFD_CLOEXEC}, data, deadline);
  if (!fd) return fail(fd.error());
  if (*fd < 0) return fail_errno("memfd_create in " + process_name(pid), static_cast<int>(-*fd));
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(*fd);
  UniqueFd here(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!here) {
    int err = errno;
    (void)remote_syscall(t, SYS_close, {static_cast<uint64_t>(*fd)}, {}, deadline);
    return fail_errno("open " + path, err);
  }
  return std::pair{static_cast<int>(*fd), std::move(here)};
}

bool write_all(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

// Where the file `fd` is mapped in the process: the address of its file offset `offset`.
std::optional<uint64_t> mapped_at(pid_t pid, int fd, uint64_t offset) {
  struct stat st {};
  auto maps = read_maps(pid);
  if (fstat(fd, &st) != 0 || !maps) return std::nullopt;
  for (const Mapping& m : *maps)
    if (m.inode == st.st_ino && m.executable && offset >= m.offset && offset < m.offset + (m.end - m.start))
      return m.start + (offset - m.offset);
  return std::nullopt;
}

// A copy of the library an earlier injection left in the process, dormant: opened here.
UniqueFd earlier_copy(pid_t pid, const TargetCode& code, const LibraryImage& image) {
  for (const Mapping& m : code.maps) {
    if (!is_injected_library(m.path) || !m.executable) continue;
    UniqueFd fd(open(mapped_file_path(pid, m).c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd || fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) != image.bytes.size()) continue;
    std::vector<uint8_t> bytes(image.bytes.size());
    if (pread(fd.get(), bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()) &&
        bytes == image.bytes)
      return fd;
  }
  return {};
}

// Descriptors of the library's or a ring's memfd that an allocscope killed
// mid-injection left open in the process: closed.
void close_leftovers(RemoteThread& t, pid_t pid, Clock::time_point deadline) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::vector<int> leftovers;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      char target[256];
      ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      std::string_view link(target, size_t(n));
      if (link.starts_with("/memfd:allocscope-")) leftovers.push_back(std::atoi(e->d_name));
    }
    closedir(d);
  }
  for (int fd : leftovers) (void)remote_syscall(t, SYS_close, {uint64_t(fd)}, {}, deadline);
}

// Whether the borrowed thread's seccomp filters allow the calls an entry
// makes.
Result<void> allowed_calls(const RemoteThread& t) {
  if (!t.seccomp_refusal().empty()) return fail(t.seccomp_refusal());
  return {};
}

// Whether the process's root has a /proc mounted, through which its
// loader opens the library's memfd.
bool proc_in_root(pid_t pid) {
  struct statfs fs {};
  std::string path = "/proc/" + std::to_string(pid) + "/root/proc";
  return statfs(path.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

// Whether the program defines malloc itself: its own calls of it are
// direct, through no slot.
bool defines_malloc(pid_t pid) {
  auto elf = ElfFile::open("/proc/" + std::to_string(pid) + "/exe");
  if (!elf) return false;
  for (const ElfSymbol& s : elf->functions())
    if (s.name == "malloc") return true;
  return false;
}

// Whether the allocscope a BUSY answer names still runs.
bool owner_alive(const as_inject_args& a) {
  return a.owner_pid && process_start_ticks(pid_t(a.owner_pid)) == a.owner_start;
}

std::string status_words(uint32_t status) {
  switch (status) {
    case AS_INJECT_BAD_ABI:
      return "a copy of another allocscope's library is in it";
    case AS_INJECT_NO_MALLOC:
      return "no malloc, free, calloc or realloc where its modules bind them";
    case AS_INJECT_PRELOADED:
      return "it loads the library already (LD_PRELOAD)";
    case AS_INJECT_BUSY:
      return "another allocscope is attached to it";
    default:
      return "status " + std::to_string(status);
  }
}

// The library's memfd in the process, loaded by its own dynamic loader.
Result<UniqueFd> load_library(RemoteThread& t, pid_t pid, const TargetCode& code, const LibraryImage& image,
                              Clock::time_point deadline) {
  auto memfd = remote_memfd(t, pid, kInjectedCopyName, deadline);
  if (!memfd) return fail(memfd.error());
  auto [number, here] = std::move(*memfd);
  if (!write_all(here.get(), image.bytes)) {
    (void)remote_syscall(t, SYS_close, {static_cast<uint64_t>(number)}, {}, deadline);
    return fail_errno("write the library into " + process_name(pid) + "'s memfd", errno);
  }
  auto path = bytes_of("/proc/self/fd/" + std::to_string(number));
  auto opened = t.run(Call{.function = code.dlopen,
                           .args = {t.data_address(path.size()), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE},
                           .data = path},
                      deadline);
  (void)remote_syscall(t, SYS_close, {static_cast<uint64_t>(number)}, {}, deadline);
  if (!opened) return fail(opened.error());
  if (!mapped_at(pid, here.get(), image.attach_offset))
    return fail("the dynamic loader of " + process_name(pid) +
                " did not load the library (no /proc in its root, static TLS full, or an older C library)");
  return std::move(here);
}

Result<as_inject_args> call_entry(RemoteThread& t, uint64_t fn, as_inject_args args,
                                  Clock::time_point deadline) {
  auto data = bytes_of(args);
  auto r = t.run(Call{.function = fn, .args = {t.data_address(data.size())}, .data = data}, deadline);
  if (!r) return fail(r.error());
  std::memcpy(&args, r->data.data(), sizeof args);
  return args;
}

// The addresses the library is to remember as sampled, in a memfd the
// process makes (it maps and closes it in the attach call). Not handed
// when that fails: the attach answers 0 seeded.
void hand_seeds(RemoteThread& t, pid_t pid, const std::vector<uint64_t>& seeds, as_inject_args& args,
                Clock::time_point deadline) {
  if (seeds.empty()) return;
  auto memfd = remote_memfd(t, pid, kSeedName, deadline);
  if (!memfd) return;
  auto bytes = std::span(reinterpret_cast<const uint8_t*>(seeds.data()), seeds.size() * sizeof(uint64_t));
  if (!write_all(memfd->second.get(), bytes)) {
    (void)remote_syscall(t, SYS_close, {static_cast<uint64_t>(memfd->first)}, {}, deadline);
    return;
  }
  args.seed_fd = memfd->first;
  args.seed_count = uint32_t(seeds.size());
}

std::optional<uint64_t> file_offset(const ElfFile& elf, const std::string& name) {
  for (const ElfSymbol& s : elf.functions())
    if (s.name == name) return elf.vaddr_to_offset(s.vaddr).value_or(0);
  return std::nullopt;
}

}  // namespace

bool is_injected_library(std::string_view mapped_path) { return is_injected_copy(mapped_path); }

Result<std::shared_ptr<const LibraryImage>> read_library_image(const std::string& path) {
  auto elf = ElfFile::open(path);
  if (!elf) return fail(elf.error());
  auto image = std::make_shared<LibraryImage>();
  image->path = path;
  auto attach = file_offset(*elf, AS_INJECT_ATTACH), detach = file_offset(*elf, AS_INJECT_DETACH);
  if (!attach || !detach || !*attach || !*detach) return fail(path + " has no injection entry points");
  image->attach_offset = *attach;
  image->detach_offset = *detach;
  auto text = read_regular_file(path, 64 << 20);
  if (!text) return fail(text.error());
  image->bytes.assign(text->begin(), text->end());
  return std::shared_ptr<const LibraryImage>(std::move(image));
}

Result<Injection> inject(pid_t pid, const InjectOptions& options) {
  auto deadline = Clock::now() + options.budget;
  auto facts = read_facts(pid);
  if (!facts) return fail(facts.error());
  if (auto why = refusal(*facts)) return fail(*why);
  auto code = find_target_code(pid);
  if (!code) return fail(code.error());
  if (!proc_in_root(pid))
    return fail("no /proc in its root (a chroot?): its loader reaches the library through /proc/self/fd");
  if (defines_malloc(pid))
    return fail("the program defines malloc itself: its own calls pass through no slot");
  const LibraryImage& image = *options.library;
  auto thread = borrow_thread(pid, *code, deadline);
  if (!thread) return fail(thread.error());
  auto start = Clock::now();
  if (auto allowed = allowed_calls(*thread); !allowed) return fail(allowed.error());
  close_leftovers(*thread, pid, deadline);
  Injection done;
  done.pid = pid;
  done.borrowed = thread->tid();
  done.library = earlier_copy(pid, *code, image);
  if (!done.library) {
    auto loaded = load_library(*thread, pid, *code, image, deadline);
    if (!loaded) return fail(loaded.error());
    done.library = std::move(*loaded);
    done.loaded_now = true;
  }
  auto attach = mapped_at(pid, done.library.get(), image.attach_offset);
  auto detach = mapped_at(pid, done.library.get(), image.detach_offset);
  if (!attach || !detach) return fail("the library's entry points are not mapped in " + process_name(pid));
  done.attach_fn = *attach;
  done.detach_fn = *detach;
  done.detach_offset = image.detach_offset;
  if (options.loaded)
    if (auto ok = options.loaded(done.library.get()); !ok) {
      thread->give_back();
      return fail(ok.error());
    }
  as_inject_args args{};
  args.abi = AS_INJECT_ABI;
  args.ring_fd = -1;
  args.seed_fd = -1;
  args.rate = options.rate;
  args.flags = options.no_java ? AS_INJECT_NO_JAVA : 0;
  args.owner_pid = uint32_t(getpid());
  args.owner_start = process_start_ticks(getpid());
  if (options.make_ring) {
    auto ring = remote_memfd(*thread, pid, kRingName, deadline);
    if (ring) {
      if (options.make_ring(std::move(ring->second)))
        args.ring_fd = ring->first;
      else
        (void)remote_syscall(*thread, SYS_close, {static_cast<uint64_t>(ring->first)}, {}, deadline);
    }
  }
  if (options.seeds) hand_seeds(*thread, pid, options.seeds(), args, deadline);  // last: its window is short
  auto answer = call_entry(*thread, done.attach_fn, args, deadline);
  if (answer && answer->status == AS_INJECT_BUSY && !owner_alive(*answer)) {
    args.flags |= AS_INJECT_TAKE_OVER;  // its allocscope died attached
    answer = call_entry(*thread, done.attach_fn, args, deadline);
  }
  if (answer && answer->status == AS_INJECT_OK && options.held) options.held(thread->tid());
  thread->give_back();
  done.paused = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
  if (!answer) return fail(answer.error());
  done.answer = *answer;
  if (answer->status != AS_INJECT_OK) return fail(status_words(answer->status));
  return done;
}

bool still_entered(const Injection& injection) {
  return mapped_at(injection.pid, injection.library.get(), injection.detach_offset) == injection.detach_fn;
}

// A thread of a process still entered, borrowed as an entry borrows one.
static Result<RemoteThread> borrow_entered_thread(const Injection& injection, Clock::time_point deadline) {
  if (!still_entered(injection))
    return fail(process_name(injection.pid) + " no longer maps the library", ESRCH);
  auto code = find_target_code(injection.pid);
  if (!code) return fail(code.error());
  return borrow_thread(injection.pid, *code, deadline);
}

Result<void> with_held_thread(const Injection& injection, const std::function<void(pid_t held)>& fn,
                              std::chrono::milliseconds budget) {
  auto deadline = Clock::now() + budget;
  auto thread = borrow_entered_thread(injection, deadline);
  if (!thread) return fail(thread.error());
  fn(thread->tid());
  thread->give_back();
  return {};
}

Result<Ejection> eject(const Injection& injection, std::chrono::milliseconds budget) {
  auto deadline = Clock::now() + budget;
  auto thread = borrow_entered_thread(injection, deadline);
  if (!thread) return fail(thread.error());
  if (auto allowed = allowed_calls(*thread); !allowed) return fail(allowed.error());
  auto start = Clock::now();
  as_inject_args args{};
  args.abi = AS_INJECT_ABI;
  args.ring_fd = -1;
  auto answer = call_entry(*thread, injection.detach_fn, args, deadline);
  thread->give_back();
  if (!answer) return fail(answer.error());
  return Ejection{answer->slots, std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start)};
}

}  // namespace allocscope::inject
