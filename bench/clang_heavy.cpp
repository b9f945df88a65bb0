// A template-heavy translation unit for bench/clang_vs_heaptrack.py: clang's
// allocations while compiling it are what the benchmark profiles. Not built.
#include <algorithm>
#include <array>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

template <int N> struct Fib { static constexpr long value = Fib<N - 1>::value + Fib<N - 2>::value; };
template <> struct Fib<0> { static constexpr long value = 0; };
template <> struct Fib<1> { static constexpr long value = 1; };

template <int N, typename T> struct Nest {
  std::map<int, std::vector<T>> m;
  std::unordered_map<std::string, Nest<N - 1, std::pair<T, int>>> u;
  auto sum() const {
    long s = 0;
    for (auto& [k, v] : m) s += k + long(v.size());
    for (auto& [k, v] : u) s += long(k.size()) + v.sum();
    return s;
  }
};
template <typename T> struct Nest<0, T> { long sum() const { return 0; } };

template <typename... Ts> long visit_all(const std::vector<std::variant<Ts...>>& v) {
  long s = 0;
  for (auto& x : v) s += std::visit([](auto&& y) { return long(sizeof(y)); }, x);
  return s;
}

#define INST(I)                                                                      \
  long f##I() {                                                                      \
    Nest<5, std::tuple<int, char, std::string, std::array<int, I>>> n;               \
    std::vector<std::variant<int, double, std::string, std::array<char, I>>> v(I);   \
    std::regex re("([a-z]+)" #I "\\d*");                                             \
    std::set<std::function<int(int)>*> fs;                                           \
    return n.sum() + visit_all(v) + Fib<I % 40>::value + long(fs.size()) +           \
           std::regex_match(std::to_string(I), re);                                  \
  }
INST(1) INST(2) INST(3) INST(4) INST(5) INST(6) INST(7) INST(8) INST(9) INST(10)

int main() { std::cout << f1() + f2() + f10() << "\n"; }
