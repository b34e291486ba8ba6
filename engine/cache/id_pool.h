// A pool of integer ids 0..n-1 with reference counts: the common core of the KV page and state-slot allocators.
// A refcount lets a page be shared by several sequences later (prefix caching). Tested in tests/scheduler/.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "voltserve/status.h"

namespace voltserve {

class IdPool {
 public:
  explicit IdPool(int32_t n);

  // A free id with refcount 1, or nullopt when none is left. The lowest free ids are handed out first, so
  // allocation is deterministic.
  std::optional<int32_t> allocate();
  // n ids or none at all (the pool is unchanged on failure).
  bool allocate_n(int32_t n, std::vector<int32_t>& out);
  // Another owner of a live id (refcount + 1).
  Status retain(int32_t id);
  // One owner fewer; the id is free again when its refcount reaches 0. Releasing a free or unknown id is an
  // error (a double free in the caller), reported rather than corrupting the pool.
  Status release(int32_t id);

  int32_t refcount(int32_t id) const;
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_total() const { return static_cast<int32_t>(refcount_.size()); }

 private:
  std::vector<int32_t> refcount_;
  std::vector<int32_t> free_;  // a min-heap of the free ids
};

// KV pages of the full-attention layers (CacheGeometry::n_pages, page_size tokens each).
class PageAllocator : public IdPool {
 public:
  explicit PageAllocator(int32_t n_pages) : IdPool(n_pages) {}
};

// Recurrent-state slots (conv + delta-rule state), one per live sequence (CacheGeometry::n_slots).
class SlotAllocator : public IdPool {
 public:
  explicit SlotAllocator(int32_t n_slots) : IdPool(n_slots) {}
};

}  // namespace voltserve
