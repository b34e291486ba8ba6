// Growing and releasing a sequence's KV page table.
#include "cache/page_table.h"

namespace voltserve {

bool PageTable::grow_to(int32_t n_tokens, PageAllocator& pages) {
  const int32_t extra = pages_for_tokens(n_tokens, page_size_) - n_pages();
  if (extra <= 0) return true;
  return pages.allocate_n(extra, pages_);
}

Status PageTable::release_all(PageAllocator& pages) {
  Status first;
  for (int32_t p : pages_) {
    Status s = pages.release(p);
    if (first.is_ok() && !s.is_ok()) first = std::move(s);
  }
  pages_.clear();
  return first;
}

}  // namespace voltserve
