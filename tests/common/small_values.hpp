// The values of the 8- and 16-bit sample types by their bits, for the CPU and GPU tests of those
// types: every one of them can be enumerated, and random ones drawn by their bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "tally/small_float.hpp"

namespace tally_test {

/** @brief How many values (bit patterns) a small sample type has: 256 or 65536. */
template <class T>
constexpr std::uint32_t value_count = std::uint32_t{1} << (8 * sizeof(T));

/** @brief The value of T with these bits (the low 8 or 16 of `bits`). */
template <class T>
T from_bits(std::uint32_t bits) {
  T value;
  const auto word = static_cast<std::conditional_t<sizeof(T) == 1, std::uint8_t, std::uint16_t>>(bits);
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

/** @brief The type's name as numpy and `--dtype` spell it. */
template <class T>
std::string small_type_name() {
  if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
  else if constexpr (std::is_same_v<T, std::int16_t>) return "int16";
  else if constexpr (std::is_same_v<T, std::uint16_t>) return "uint16";
  else if constexpr (std::is_same_v<T, tally::float16>) return "float16";
  else return "bfloat16";
}

}  // namespace tally_test
