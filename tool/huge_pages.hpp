// Memory for the large buffers `tally hist` reads files into, which the kernel may back with
// 2 MiB pages: a read into fresh memory faults it in a page at a time, and with 4 KiB pages the
// faults cost as much as the copy (an 80 MB file from the page cache: 36 ms, 19 ms on 2 MiB
// pages; numpy asks for the same for its arrays). Host-only, Linux's madvise where there is one.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tally::cli {

/** @brief Frees what huge_page_buffer allocated. */
struct free_delete {
  void operator()(void* p) const noexcept { std::free(p); }
};

/** @brief Uninitialized room for `count` T, 2 MiB-aligned and marked for huge pages when it spans one or more. */
template <class T>
std::unique_ptr<T[], free_delete> huge_page_buffer(std::size_t count) {
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 1);
  if (bytes < huge_page) {
    void* small = std::malloc(bytes);
    if (small == nullptr) throw std::bad_alloc();
    return std::unique_ptr<T[], free_delete>(static_cast<T*>(small));
  }
  const std::size_t rounded = (bytes + huge_page - 1) / huge_page * huge_page;
  void* room = std::aligned_alloc(huge_page, rounded);
  if (room == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  ::madvise(room, rounded, MADV_HUGEPAGE);  // advice only: without it the read still works
#endif
  return std::unique_ptr<T[], free_delete>(static_cast<T*>(room));
}

}  // namespace tally::cli
