// Small string helpers with errors as values (no exceptions, no locale).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace podshim::str {

// Strips ASCII whitespace (space, \t, \n, \r) from both ends.
std::string_view trim(std::string_view s);

// Splits on `sep`; keeps empty fields ("a,,b" → {"a","","b"}).
std::vector<std::string_view> split(std::string_view s, char sep);

bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

// Parses a base-10 integer that spans the whole string (after trim); errors
// name the input ("invalid integer 'abc'", "integer '99999999999999999999' out of range").
Result<uint64_t> parse_u64(std::string_view s);
Result<int64_t> parse_i64(std::string_view s);

}  // namespace podshim::str
