// Parsing of the CLI's option values that CLI11 does not parse itself (counts such as 2^28), and
// the check that a command with only a CPU side was not asked for the GPU.
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

/**
 * @brief For commands whose GPU side is not built yet: `--backend gpu`, or `auto` on a machine
 * with a GPU, throws errc::not_supported naming `--backend` (rather than run the CPU version under
 * a GPU label). `gpu_part` says what is missing, e.g. "sweep".
 */
void require_cpu_backend(const std::string& backend_name, std::string_view command, std::string_view gpu_part);

}  // namespace tally::cli
