// An enum's names, written once: one table gives both directions, the name
// a value is written as (state file, API, metrics labels, logs) and the value
// a name is read back as, with an error that lists every accepted name.
//
//   constexpr Names<Color, 2> kColors{{{Color::Red, "red"}, {Color::Blue, "blue"}}};
//   kColors.name(Color::Red)            -> "red"
//   kColors.parse("green", "color")     -> error "invalid color 'green' (want red or blue)"
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.h"

namespace podshim {

template <class E, std::size_t N>
struct Names {
  static_assert(N > 0, "an enum with no names");
  struct Entry {
    E value;
    std::string_view name;
  };
  std::array<Entry, N> entries;

  // The name of `v`; the first entry's name for a value outside the table
  // (a value cast from an integer that no enumerator holds).
  constexpr std::string_view name(E v) const {
    for (const auto& e : entries)
      if (e.value == v) return e.name;
    return entries[0].name;
  }

  // The value named `s` (exact, case-sensitive); EINVAL naming `what`, the
  // input and every accepted name otherwise.
  Result<E> parse(std::string_view s, std::string_view what) const {
    for (const auto& e : entries)
      if (e.name == s) return e.value;
    std::string want;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) want += i + 1 == N ? " or " : ", ";
      want += entries[i].name;
    }
    return fail(EINVAL, "invalid {} '{}' (want {})", what, s, want);
  }
};

}  // namespace podshim
