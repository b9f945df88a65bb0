// A realistic C++ allocation pattern: build maps of strings to vectors, look
// them up, tear them down. Prints the milliseconds of the work itself.
//   cxx_workload [--rounds N] [--wait]
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

unsigned long build_and_tear_down(int round) {
  std::map<std::string, std::vector<int>> index;
  std::unordered_map<std::string, std::string> names;
  for (int i = 0; i < 20000; ++i) {
    std::string key = "key-" + std::to_string(i * 7919 % 100003) + "-round-" + std::to_string(round);
    auto& v = index[key];
    for (int j = 0; j < i % 17; ++j) v.push_back(j);
    names.emplace(key, std::string(static_cast<size_t>(i % 200), 'x'));
  }
  unsigned long sum = 0;
  for (const auto& [k, v] : index) sum += v.size() + names[k].size();
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 20;
  bool wait = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--wait"))
      wait = true;
    else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--wait]\n", argv[0]);
      return 2;
    }
  }
  if (wait) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    std::printf("ready\n");
    std::fflush(stdout);
    int sig;
    sigwait(&set, &sig);
  }
  auto start = std::chrono::steady_clock::now();
  unsigned long sum = 0;
  for (int r = 0; r < rounds; ++r) sum += build_and_tear_down(r);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("checksum %lu\nms %.1f\n", sum, ms);
  return 0;
}
