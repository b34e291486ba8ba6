// Device helpers shared by the sm70 and sm80 linear families: streaming loads, the e2m1-pair lookup table,
// FP8 pair decode, e4m3 scales, f16x2 multiply. Only instructions that sm_70 has (checked by
// scripts/check-sm70.sh, which assembles the sm70 family for sm_70).
#pragma once

#include <cstdint>

#include <cuda_fp16.h>

namespace voltserve::kernels::detail {

constexpr int kLutWords = 256 * 32;  // 256 code bytes x 32 lanes (one private column per lane: no bank conflicts)

// 16-byte load that bypasses L1 allocation: weights are read exactly once, L1 stays for the activations.
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 16-byte activation load through the coherent path (L1-cached). Not ld.global.nc (__ldg): with programmatic
// dependent launch x may still be written by the previous kernel until griddepcontrol.wait returns, and ptxas
// hoists non-coherent loads above that wait (seen on sm_90: a RAW race caught by the chained-launch test).
__device__ __forceinline__ uint4 ld_x(const __half* p) {
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// a * {b.half[H], b.half[H]} (f16x2): ptxas folds the broadcast into the multiply's operand selector (.H0_H0 /
// .H1_H1), so it costs no instruction, unlike a byte permute into a register first.
template <int H>
__device__ __forceinline__ uint32_t hmul2_bcast(uint32_t a, uint32_t b) {
  uint32_t d;
  if constexpr (H == 0) {
    asm("{.reg .b16 l, h; .reg .b32 t; mov.b32 {l, h}, %2; mov.b32 t, {l, l}; mul.rn.f16x2 %0, %1, t;}"
        : "=r"(d) : "r"(a), "r"(b));
  } else {
    asm("{.reg .b16 l, h; .reg .b32 t; mov.b32 {l, h}, %2; mov.b32 t, {h, h}; mul.rn.f16x2 %0, %1, t;}"
        : "=r"(d) : "r"(a), "r"(b));
  }
  return d;
}

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t half_bits_dup(float v) { return half2_bits(v, v); }

// e2m1 magnitude/sign code to float (exact).
__device__ __forceinline__ float e2m1_value(uint32_t code) {
  const uint32_t e = (code >> 1) & 3;
  const uint32_t m = code & 1;
  const float mag = e != 0 ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * static_cast<float>(m);
  return (code & 8) ? -mag : mag;
}

// float8_e4m3fn to float (exact; NaN for S.1111.111).
__device__ __forceinline__ float e4m3_value(uint32_t bits) {
  const uint32_t e = (bits >> 3) & 0xF;
  const uint32_t m = bits & 7;
  float mag;
  if (e == 0xF && m == 7) {
    mag = __uint_as_float(0x7FC00000u);
  } else if (e == 0) {
    mag = static_cast<float>(m) * (1.0f / 512.0f);
  } else {
    mag = __uint_as_float(((e + 120u) << 23) | (m << 20));
  }
  return (bits & 0x80) ? -mag : mag;
}

// Fills the per-lane lookup table: entry [byte][lane] = half2(e2m1(low nibble), e2m1(high nibble)), true values.
// An e2m1 value's f16 has a zero low byte; its high byte comes from a packed 8-entry table plus the sign.
__device__ __forceinline__ void fill_e2m1_lut(uint32_t* lut) {
  constexpr uint64_t kHigh = 0x464442403E3C3800ull;  // f16 high bytes of 0, .5, 1, 1.5, 2, 3, 4, 6
  // Each entry is computed once and written to its 32 lane columns with 16-byte stores (8 threads per entry).
  for (int i = threadIdx.x; i < kLutWords / 4; i += blockDim.x) {
    const uint32_t b = static_cast<uint32_t>(i) >> 3;
    const uint32_t lo = static_cast<uint32_t>((kHigh >> (8 * (b & 7))) & 0xFF) | ((b & 0x08) << 4);
    const uint32_t hi = static_cast<uint32_t>((kHigh >> (8 * ((b >> 4) & 7))) & 0xFF) | (b & 0x80);
    const uint32_t v = (lo << 8) | (hi << 24);
    reinterpret_cast<uint4*>(lut)[i] = make_uint4(v, v, v, v);
  }
}

// e4m3 group scale (valid, non-NaN codes) times `mult`, duplicated into an f16x2: the e4m3 bits are moved into
// f16 fields (exact, value * 2^-8), so `mult` must carry the 2^8.
__device__ __forceinline__ uint32_t e4m3_scale_h2(uint32_t b, float mult) {
  const uint32_t h = ((b & 0x80) << 8) | ((b & 0x7F) << 7);
  return half_bits_dup(__half2float(__ushort_as_half(static_cast<unsigned short>(h))) * mult);
}

// Byte j of a word through this lane's table column.
template <int J>
__device__ __forceinline__ uint32_t lut_pair(const uint32_t* lut_lane, uint32_t word) {
  return lut_lane[((word >> (8 * J)) & 0xFF) * 32];
}

// Two e4m3 bytes (J = 0: bytes 0,1; J = 1: bytes 2,3) to half2 holding value * 2^-8 exactly
// (the e4m3 exponent/mantissa bits moved into the f16 fields; the 2^8 goes into the fp32 output scale).
template <int J>
__device__ __forceinline__ uint32_t fp8_pair(uint32_t word) {
  const uint32_t y = __byte_perm(word, 0u, J == 0 ? 0x1404u : 0x3424u);  // [0, b_lo, 0, b_hi]
  return (y & 0x80008000u) | ((y >> 1) & 0x3F803F80u);
}

}  // namespace voltserve::kernels::detail
