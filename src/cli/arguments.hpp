// Parsing of the CLI's option values that CLI11 does not parse itself (counts such as 2^28).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tally::cli {

/**
 * @brief "2^28", "1e6", "65536" -> a count >= 0; anything else throws errc::invalid_argument
 * naming `command` and `option`.
 */
std::int64_t parse_count(const std::string& text, std::string_view command, std::string_view option);

}  // namespace tally::cli
