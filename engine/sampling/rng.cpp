// xoshiro256** 1.0 and splitmix64 as published by Blackman and Vigna (public-domain algorithms, written here
// from their description).
#include "sampling/rng.h"

namespace voltserve {

namespace {
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
  // splitmix64 never yields four zero words, so the state is valid for every seed (0 included).
  uint64_t sm = seed;
  for (uint64_t& w : s_) w = splitmix64(sm);
}

uint64_t Xoshiro256::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Xoshiro256::next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

}  // namespace voltserve
