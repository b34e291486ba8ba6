// Reference-counted id pool behind PageAllocator and SlotAllocator.
#include "cache/id_pool.h"

#include <algorithm>
#include <functional>
#include <string>

namespace voltserve {

IdPool::IdPool(int32_t n) : refcount_(static_cast<size_t>(std::max(n, 0)), 0) {
  free_.reserve(refcount_.size());
  for (int32_t id = 0; id < n_total(); ++id) free_.push_back(id);  // ascending order is already a min-heap
}

std::optional<int32_t> IdPool::allocate() {
  if (free_.empty()) return std::nullopt;
  std::pop_heap(free_.begin(), free_.end(), std::greater<>{});
  const int32_t id = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(id)] = 1;
  return id;
}

bool IdPool::allocate_n(int32_t n, std::vector<int32_t>& out) {
  if (n < 0 || n > n_free()) return false;
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate());
  return true;
}

Status IdPool::retain(int32_t id) {
  if (id < 0 || id >= n_total() || refcount_[static_cast<size_t>(id)] == 0) {
    return internal_error("retain of id " + std::to_string(id) + " that is not allocated (pool of " +
                          std::to_string(n_total()) + ")");
  }
  ++refcount_[static_cast<size_t>(id)];
  return Status::ok();
}

Status IdPool::release(int32_t id) {
  if (id < 0 || id >= n_total() || refcount_[static_cast<size_t>(id)] == 0) {
    return internal_error("release of id " + std::to_string(id) + " that is not allocated (pool of " +
                          std::to_string(n_total()) + ")");
  }
  if (--refcount_[static_cast<size_t>(id)] == 0) {
    free_.push_back(id);
    std::push_heap(free_.begin(), free_.end(), std::greater<>{});
  }
  return Status::ok();
}

int32_t IdPool::refcount(int32_t id) const {
  if (id < 0 || id >= n_total()) return 0;
  return refcount_[static_cast<size_t>(id)];
}

}  // namespace voltserve
