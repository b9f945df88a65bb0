// An enum's values by name, one table per enum: its names, its parsing and
// the list a message or a --help line gives, from the same rows.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace allocscope {

template <typename E>
struct Named {
  E value;
  std::string_view name;
};

template <typename E, size_t N>
std::optional<E> parse_named(const std::array<Named<E>, N>& table, std::string_view name) {
  for (const Named<E>& row : table)
    if (row.name == name) return row.value;
  return std::nullopt;
}

// The value's name; "?" for one the table lacks.
template <typename E, size_t N>
std::string_view name_of(const std::array<Named<E>, N>& table, E value) {
  for (const Named<E>& row : table)
    if (row.value == value) return row.name;
  return "?";
}

// Every name, in the table's order: "a, b, c" (`last`: what goes before the
// last one, ", " or " or ").
template <typename E, size_t N>
std::string names_of(const std::array<Named<E>, N>& table, std::string_view last = ", ") {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i) out += i + 1 == N ? last : std::string_view(", ");
    out += table[i].name;
  }
  return out;
}

}  // namespace allocscope
