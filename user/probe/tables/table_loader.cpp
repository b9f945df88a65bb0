#include "probe/tables/table_loader.h"

#include <fcntl.h>
#include <gelf.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "base/unique_fd.h"
#include "host/process.h"
#include "symbols/elf_file.h"
#include "symbols/unwind_table.h"

extern char** environ;

namespace allocscope {

as_file_key file_key_of(const Mapping& m) {
  return {.ino = m.inode, .dev = (m.dev_major << 20) | m.dev_minor, .pad = 0};
}

bool TableLoader::known(const as_file_key& key) const {
  Key k{key.ino, key.dev};
  return tables_.contains(k) || failed_.contains(k);
}

// Opens the file behind mapping `m` of `pid` (or the program held since its
// exec, when the process is gone) and builds its table off this thread;
// false when neither can be opened.
bool TableLoader::build_later(const as_file_key& key, pid_t pid, const Mapping& m) {
  std::string path = mapped_file_path(pid, m);
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (auto pinned = pinned_.find({key.ino, key.dev}); !file && pinned != pinned_.end())
    file = UniqueFd(::fcntl(pinned->second.get(), F_DUPFD_CLOEXEC, 0));
  if (!file) return false;
  std::vector<BackgroundBuilds::File> todo;
  todo.push_back({key, std::move(path), std::move(file)});
  submit(std::move(todo), true);
  return true;
}

void TableLoader::submit(std::vector<BackgroundBuilds::File> files, bool first) {
  for (const auto& f : files) building_.insert({f.key.ino, f.key.dev});
  if (!background_)
    background_ = std::make_unique<BackgroundBuilds>([this] { session_.wake(); }, runtime_tables_);
  background_->submit(std::move(files), first);
}

void TableLoader::pin_executable(pid_t pid, const as_file_key& key) {
  constexpr size_t kMaxPinned = 256;
  Key k{key.ino, key.dev};
  if (known(key) || pinned_.contains(k)) return;
  UniqueFd fd(::open(("/proc/" + std::to_string(pid) + "/exe").c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  // The same file as the kernel's exec event named (the pid may be reused).
  if (!fd || fstat(fd.get(), &st) != 0 || st.st_ino != key.ino ||
      ((major(st.st_dev) << 20) | minor(st.st_dev)) != key.dev)
    return;
  if (pinned_order_.size() >= kMaxPinned) {
    pinned_.erase(pinned_order_.front());
    pinned_order_.pop_front();
  }
  pinned_.emplace(k, std::move(fd));
  pinned_order_.push_back(k);
}

// Builds the tables of several files at once (one thread a core), then
// loads them: before recording, the time a command waits to start.
void TableLoader::load_all(const std::vector<std::pair<as_file_key, std::string>>& files) {
  std::vector<std::pair<as_file_key, std::string>> todo;
  std::set<Key> seen;
  for (const auto& [key, path] : files)
    if (!known(key) && seen.insert({key.ino, key.dev}).second) todo.emplace_back(key, path);
  std::vector<std::optional<BuiltTable>> built(todo.size());
  std::atomic<size_t> next = 0;
  auto work = [&] {
    for (size_t i; (i = next++) < todo.size();) built[i] = timed_build(todo[i].second, runtime_tables_);
  };
  std::vector<std::thread> workers;
  for (unsigned n = std::max(1u, std::thread::hardware_concurrency()); n > 1 && workers.size() + 1 < n;)
    workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  for (size_t i = 0; i < todo.size(); ++i)
    if (!install(todo[i].first, todo[i].second, std::move(*built[i]))) ++stats_.failed;
}

bool TableLoader::install(const as_file_key& key, const std::string& path, BuiltTable&& b) {
  Key k{key.ino, key.dev};
  if (!b.table) {
    if (verbose_)
      std::fprintf(stderr, "allocscope: no unwind table for %s: %s\n", path.c_str(),
                   b.table.error().message.c_str());
    return false;
  }
  UnwindTable& t = *b.table;
  if (stats_.rows + t.rows.size() > max_rows_ || t.rows.size() > AS_TABLE_MAX_ROWS) {
    ++stats_.full;
    failed_.insert(k);  // not asked again
    return true;
  }
  if (auto ok = session_.load_unwind_table(key, t.rows); !ok) {
    ++stats_.failed;
    std::fprintf(stderr, "allocscope: warning: %s: %s\n", path.c_str(), ok.error().message.c_str());
    failed_.insert(k);
    return true;
  }
  ++stats_.files;
  stats_.rows += t.rows.size();
  stats_.build_ms += b.ms;
  if (verbose_)
    std::fprintf(stderr, "allocscope: unwind table of %s: %zu rows from %s (%lu unsupported), %.1f ms\n",
                 path.c_str(), t.rows.size(), source_name(t), (unsigned long)t.unsupported, b.ms);
  tables_.emplace(k, std::move(t.rows));
  pinned_.erase(k);  // in the kernel now: the file need not be held (its key stays in the order, harmlessly)
  return true;
}

const std::vector<as_unwind_row>* TableLoader::rows(pid_t pid, const Mapping& m) {
  as_file_key key = file_key_of(m);
  Key k{key.ino, key.dev};
  if (auto it = tables_.find(k); it != tables_.end()) return &it->second;
  if (!failed_.contains(k) && !building(key) && !build_later(key, pid, m)) failed_.insert(k);
  return nullptr;
}

std::optional<as_unwind_row> ProcessRows::row(uint64_t pc) {
  const Mapping* m = find_mapping(maps_, pc);
  if (!m || !m->executable) return std::nullopt;
  as_unwind_row none{0, 0, AS_ROW_NONE, 0};
  if (!m->is_file()) return as_frame_pointer_row();  // JIT code, as the kernel treats it
  const std::vector<as_unwind_row>* rows = tables_.rows(pid_, *m);
  if (!rows) {
    if (tables_.building(file_key_of(*m))) waits_for_ = file_key_of(*m);
    return none;
  }
  const as_unwind_row* r = find_row(*rows, m->file_offset(pc));
  return r ? *r : none;
}

void TableLoader::on_request(pid_t pid, const as_vma& vma) {
  as_file_key key{.ino = vma.ino, .dev = vma.dev, .pad = 0};
  Mapping m;
  m.start = vma.start;
  m.end = vma.end;
  m.offset = vma.pgoff;
  m.inode = vma.ino;
  m.dev_major = vma.dev >> 20;
  m.dev_minor = vma.dev & 0xfffff;
  // The mapping itself, through /proc/PID/map_files: the very file the
  // kernel's vma names, whatever mount namespace or overlay it is in.
  m.path = "/";
  // On its way (and its load clears the request), or in already.
  if (known(key) || building(key) || build_later(key, pid, m)) return;
  ++stats_.failed;
  // The process is gone: another one mapping the file will ask again.
  session_.forget_table_request(key);
}

std::vector<std::pair<as_file_key, std::string>> TableLoader::process_files(pid_t pid,
                                                                            uint64_t max_bytes) const {
  std::vector<std::pair<as_file_key, std::string>> files;
  auto maps = read_maps(pid);
  if (!maps) return files;
  // Each file under the name the kernel's walks will ask for it by.
  std::map<uint64_t, as_file_key> kernel_names;  // by start address
  for (const as_vma& v : session_.code_mappings(pid).value_or(std::vector<as_vma>{}))
    kernel_names[v.start] = {.ino = v.ino, .dev = v.dev, .pad = 0};
  for (const Mapping& m : *maps) {
    if (!m.executable || !m.is_file()) continue;
    std::string path = mapped_file_path(pid, m);
    struct stat st;
    if (max_bytes != UINT64_MAX && (stat(path.c_str(), &st) != 0 || uint64_t(st.st_size) > max_bytes))
      continue;
    auto named = kernel_names.find(m.start);
    files.emplace_back(named == kernel_names.end() ? file_key_of(m) : named->second, path);
  }
  return files;
}

void TableLoader::load_process(pid_t pid, uint64_t max_bytes) { load_all(process_files(pid, max_bytes)); }

void TableLoader::load_process_later(pid_t pid, uint64_t max_bytes, std::function<void()> then) {
  std::vector<BackgroundBuilds::File> todo;
  Waiter w{uint32_t(pid), {}, std::move(then)};
  for (auto& [key, path] : process_files(pid, max_bytes)) {
    if (known(key)) continue;
    if (!building(key)) {
      UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!file) continue;  // the process is gone: another one will ask
      todo.push_back({key, std::move(path), std::move(file)});
    }
    w.needs.emplace_back(key.ino, key.dev);
  }
  if (w.needs.empty()) {
    w.then();
    return;
  }
  if (!todo.empty()) submit(std::move(todo), false);
  waiters_.push_back(std::move(w));
}

size_t TableLoader::collect() {
  if (!background_) return 0;
  std::vector<FinishedBuild> finished = background_->take();
  for (FinishedBuild& f : finished) {
    building_.erase({f.key.ino, f.key.dev});
    if (!known(f.key) && !install(f.key, f.path, std::move(f.built))) {
      ++stats_.failed;
      failed_.insert({f.key.ino, f.key.dev});
    }
  }
  // Continuations run outside the list: one may ask for more builds.
  std::vector<Waiter> ready;
  std::erase_if(waiters_, [&](Waiter& w) {
    bool done =
        std::none_of(w.needs.begin(), w.needs.end(), [&](const Key& k) { return building_.contains(k); });
    if (done) ready.push_back(std::move(w));
    return done;
  });
  for (Waiter& w : ready) w.then();
  return finished.size();
}

void TableLoader::wait_for(const as_file_key& key, uint64_t max_ms) {
  collect_while([&] { return building(key); }, max_ms);
}

void TableLoader::wait_for_builds(uint64_t max_ms) {
  collect_while([&] { return !building_.empty(); }, max_ms);
}

void TableLoader::collect_while(const std::function<bool()>& pending, uint64_t max_ms) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  while (pending() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    collect();
  }
}

std::unordered_set<uint32_t> TableLoader::waiting_processes() const {
  std::unordered_set<uint32_t> pids;
  for (const Waiter& w : waiters_) pids.insert(w.pid);
  return pids;
}

void TableLoader::load_paths(const std::vector<std::string>& paths) {
  std::vector<std::pair<as_file_key, std::string>> files;
  for (const std::string& path : paths) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      files.push_back(
          {{.ino = st.st_ino, .dev = (major(st.st_dev) << 20) | minor(st.st_dev), .pad = 0}, path});
  }
  load_all(files);
}

namespace {

// A loader only root can have written: it runs with allocscope's privileges.
bool trusted_glibc_loader(const std::string& path) {
  struct stat st;
  std::string base = path.substr(path.rfind('/') + 1);
  return base.rfind("ld-linux", 0) == 0 && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH));
}

std::string run_for_output(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "";
  UniqueFd rd(fds[0]), wr(fds[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, wr.get(), 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args = exec_strings(argv);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  wr.reset();
  if (rc != 0) return "";
  std::string out;
  char buf[4096];
  for (ssize_t got; (got = read(rd.get(), buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR);)
    if (got > 0 && out.size() < (1 << 20)) out.append(buf, size_t(got));
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

}  // namespace

std::vector<std::string> shared_libraries(const std::string& program) {
  std::vector<std::string> libs;
  auto elf = ElfFile::open(program);
  std::string interp = elf ? elf->interpreter() : "";
  if (interp.empty() || !trusted_glibc_loader(interp)) return libs;
  // "\tlibfoo.so.1 => /usr/lib/libfoo.so.1 (0x...)" or "\t/lib64/ld-linux-x86-64.so.2 (0x...)".
  std::istringstream in(run_for_output({interp, "--list", program}));
  for (std::string line; std::getline(in, line);) {
    size_t arrow = line.find("=> ");
    size_t start = arrow != std::string::npos ? arrow + 3 : line.find_first_not_of(" \t");
    size_t end = line.rfind(" (0x");
    if (start == std::string::npos || end == std::string::npos || end <= start || line[start] != '/')
      continue;
    libs.push_back(line.substr(start, end - start));
  }
  return libs;
}

}  // namespace allocscope
