// The one error type of tally's owning layer (CPU backend, GPU host API, CLI): thrown with a
// message that names the function, the argument and the value the caller passed.
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tally {

/** @brief What kind of failure an error reports. */
enum class errc {
  invalid_argument,  ///< the caller passed a value the function cannot accept
  not_supported,     ///< the strategy, type or backend cannot do what was asked
  out_of_memory,     ///< temporary storage could not be allocated
  cuda_error,        ///< the CUDA runtime reported an error
  io_error,          ///< a file could not be read or written
  communication_error,  ///< a collective across GPUs (NCCL) reported an error
};

/** @brief The exception tally throws; `argument()` names the offending argument, if any. */
class error : public std::runtime_error {
 public:
  error(errc code, std::string argument, const std::string& message)
      : std::runtime_error(message), code_(code), argument_(std::move(argument)) {}

  /** @brief The kind of failure. */
  [[nodiscard]] errc code() const noexcept { return code_; }
  /** @brief The name of the argument at fault, or an empty string. */
  [[nodiscard]] const std::string& argument() const noexcept { return argument_; }

 private:
  errc code_;
  std::string argument_;
};

/** @brief Throws `errc::invalid_argument` naming `function` and `argument`. */
[[noreturn]] inline void throw_invalid_argument(std::string_view function, std::string_view argument,
                                                std::string_view what) {
  throw error(errc::invalid_argument, std::string(argument),
              std::string(function) + ": argument '" + std::string(argument) + "' " + std::string(what));
}

/**
 * @brief Runs `call`, turning a failed host allocation (std::bad_alloc: the CPU backend's private
 * copies, tables or fixed-point sums did not fit) into errc::out_of_memory naming `function`.
 */
template <class Call>
decltype(auto) reporting_host_memory_shortage(std::string_view function, Call&& call) {
  try {
    return call();
  } catch (const std::bad_alloc&) {
    throw error(errc::out_of_memory, "",
                std::string(function) + ": the temporary host memory this call needs could not be allocated");
  }
}

}  // namespace tally
