// One sequence's KV page table: the pages that hold its positions [0, capacity), grown as tokens are computed.
// Tested in tests/scheduler/cache_test.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/id_pool.h"

namespace voltserve {

// Pages needed to hold n_tokens positions.
inline int32_t pages_for_tokens(int32_t n_tokens, int32_t page_size) {
  return n_tokens <= 0 ? 0 : (n_tokens + page_size - 1) / page_size;
}

class PageTable {
 public:
  explicit PageTable(int32_t page_size) : page_size_(page_size) {}

  // Makes room for n_tokens positions, all or nothing: false (table unchanged) when the pool is short.
  bool grow_to(int32_t n_tokens, PageAllocator& pages);
  // Appends a page the caller already holds one reference on, for this table to own (a prefix-cache hit's shared
  // or copied pages); the table must not cover it yet.
  void adopt(int32_t page) { pages_.push_back(page); }
  // Hands every page back to the pool (one release each) and empties the table.
  Status release_all(PageAllocator& pages);

  std::span<const int32_t> pages() const { return pages_; }
  int32_t n_pages() const { return static_cast<int32_t>(pages_.size()); }
  int32_t capacity_tokens() const { return n_pages() * page_size_; }
  int32_t page_size() const { return page_size_; }

 private:
  int32_t page_size_;
  std::vector<int32_t> pages_;
};

}  // namespace voltserve
