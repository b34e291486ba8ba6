// See ids.h. A per-thread generator seeded from random_device: ids only need to be unique, not secret.
#include "openai/ids.h"

#include <random>

namespace voltserve::openai {

std::string random_id(std::string_view prefix, int n_hex) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string out(prefix);
  for (int i = 0; i < n_hex; ++i) out.push_back(kHex[rng() & 15]);
  return out;
}

}  // namespace voltserve::openai
