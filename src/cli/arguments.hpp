// Parsing of the CLI's option values that CLI11 does not parse itself (counts such as 2^28), and
// the choice of backend behind `--backend auto|gpu|cpu`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tally/strategy.hpp"

namespace tally::cli {

/**
 * @brief "2^28", "1e6", "65536" -> a count >= 0; anything else throws errc::invalid_argument
 * naming `command` and `option`.
 */
std::int64_t parse_count(const std::string& text, std::string_view command, std::string_view option);

/**
 * @brief The backend `--backend` names: `auto` is the GPU when one is present, else the CPU.
 * `--backend gpu` without a usable GPU throws errc::not_supported naming `--backend` and saying
 * why (no GPU present, or a build without CUDA).
 */
backend resolve_backend(const std::string& backend_name, std::string_view command);

}  // namespace tally::cli
