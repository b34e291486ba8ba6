// SIMT emulator for the [unit] tests: runs CUDA-style kernel code on the CPU, without a GPU or a CUDA toolkit, so
// the indexing, masking, shuffles and barriers of device code are exercised in CI (tests/kernels/attention_emu_test.cpp).
// Every thread of a block is a fiber (ucontext) on one OS thread; blocks run one after another, so a `static`
// local is the block's shared memory. __syncthreads / __syncwarp wait until every live thread of the block / warp
// has arrived (exited threads drop out, as on the GPU); shuffles go through a per-warp exchange slot between two
// warp barriers and fail the run if a lane of the warp has exited (undefined on the GPU). Threads are resumed in a
// seeded random order each round, so a missing barrier shows up as wrong data. A round in which no thread makes
// progress is a deadlock and aborts. Provides only what the kernels use: the qualifiers, dim3/uint2/uint4/
// float2/float4, thread and block indices, barriers, __shfl_sync / __shfl_xor_sync and the fp16 conversions.
// Include it before the kernel header; compile with -fno-strict-aliasing (kernels reinterpret buffers) and
// -Wno-unknown-pragmas (#pragma unroll).
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/fp_formats.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
// Aligned like CUDA's, so -fsanitize=alignment catches a vector load the GPU would fault on.
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct __half {
  uint16_t bits;
};

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace simt_emu {

inline constexpr size_t kStackBytes = 256 * 1024;

struct Fiber {
  ucontext_t ctx{};
  dim3 tid;
  int warp = 0;
  int lane = 0;
  bool done = false;
};

struct Barrier {
  int live = 0;
  int arrived = 0;
  uint64_t generation = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  ucontext_t scheduler{};
  int current = -1;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<std::array<uint64_t, 32>> slots;
  std::function<void()> body;
  uint64_t events = 0;  // arrivals, releases and exits: progress
  const char* error = nullptr;
};

inline Block* g_block = nullptr;

inline Fiber& self() { return g_block->fibers[static_cast<size_t>(g_block->current)]; }

// Context switches live in functions of their own: swapcontext returns twice, which would make the compiler treat
// every local of a caller as clobbered.
[[gnu::noinline]] inline void yield() { swapcontext(&self().ctx, &g_block->scheduler); }
[[gnu::noinline]] inline void resume(Block& b, int i) {
  b.current = i;
  threadIdx = b.fibers[static_cast<size_t>(i)].tid;
  swapcontext(&b.scheduler, &b.fibers[static_cast<size_t>(i)].ctx);
}

inline void arrive(Barrier& b) {
  const uint64_t gen = b.generation;
  ++g_block->events;
  if (++b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (b.generation == gen) yield();
}

inline void drop(Barrier& b) {
  --b.live;
  if (b.arrived > 0 && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
  }
}

inline void trampoline() {
  g_block->body();
  Fiber& f = self();
  f.done = true;
  ++g_block->events;
  drop(g_block->block_barrier);
  drop(g_block->warp_barriers[static_cast<size_t>(f.warp)]);
  // uc_link returns to the scheduler.
}

template <class T>
T exchange(T v, int src_lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
  Fiber& f = self();
  Barrier& wb = g_block->warp_barriers[static_cast<size_t>(f.warp)];
  if (wb.live != 32 && g_block->error == nullptr) g_block->error = "shuffle in a warp with exited lanes";
  auto& slot = g_block->slots[static_cast<size_t>(f.warp)];
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  slot[static_cast<size_t>(f.lane)] = bits;
  arrive(wb);
  T r;
  const uint64_t got = slot[static_cast<size_t>(src_lane & 31)];
  std::memcpy(&r, &got, sizeof(T));
  arrive(wb);
  return r;
}

[[gnu::noinline]] inline void init_fiber(Fiber& f, char* stack, ucontext_t* link) {
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = stack;
  f.ctx.uc_stack.ss_size = kStackBytes;
  f.ctx.uc_link = link;
  makecontext(&f.ctx, &trampoline, 0);
}

// Runs body() once per thread of every block of the grid (blocks in order x, y, z); returns an error text or null.
inline const char* launch(dim3 grid, dim3 block, const std::function<void()>& body, uint64_t seed = 1) {
  const int n = static_cast<int>(block.x * block.y * block.z);
  if (n % 32 != 0) return "block size must be a multiple of 32";
  gridDim = grid;
  blockDim = block;
  std::mt19937_64 rng(seed);
  Block b;
  b.body = body;
  b.fibers.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) b.stacks.emplace_back(new char[kStackBytes]);
  b.warp_barriers.resize(static_cast<size_t>(n / 32));
  b.slots.resize(static_cast<size_t>(n / 32));
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  g_block = &b;
  for (unsigned bz = 0; bz < grid.z; ++bz) {
    for (unsigned by = 0; by < grid.y; ++by) {
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx = dim3{bx, by, bz};
        b.block_barrier = Barrier{n, 0, 0};
        for (auto& w : b.warp_barriers) w = Barrier{32, 0, 0};
        for (int i = 0; i < n; ++i) {
          Fiber& f = b.fibers[static_cast<size_t>(i)];
          f.done = false;
          f.tid = dim3{static_cast<unsigned>(i) % block.x, (static_cast<unsigned>(i) / block.x) % block.y,
                       static_cast<unsigned>(i) / (block.x * block.y)};
          f.warp = i / 32;
          f.lane = i % 32;
          init_fiber(f, b.stacks[static_cast<size_t>(i)].get(), &b.scheduler);
        }
        for (;;) {
          bool any = false;
          const uint64_t events = b.events;
          std::shuffle(order.begin(), order.end(), rng);
          for (int i : order) {
            Fiber& f = b.fibers[static_cast<size_t>(i)];
            if (f.done) continue;
            any = true;
            resume(b, i);
          }
          if (!any) break;
          if (b.events == events) {
            g_block = nullptr;
            return "deadlock: no thread made progress (a barrier some threads never reach?)";
          }
        }
        if (b.error != nullptr) {
          g_block = nullptr;
          return b.error;
        }
      }
    }
  }
  g_block = nullptr;
  return nullptr;
}

}  // namespace simt_emu

inline void __syncthreads() { simt_emu::arrive(simt_emu::g_block->block_barrier); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  simt_emu::arrive(simt_emu::g_block->warp_barriers[static_cast<size_t>(simt_emu::self().warp)]);
}
template <class T>
T __shfl_sync(unsigned, T v, int src_lane, int = 32) {
  return simt_emu::exchange(v, src_lane);
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask, int = 32) {
  return simt_emu::exchange(v, simt_emu::self().lane ^ lane_mask);
}

inline __half __float2half_rn(float f) { return __half{voltserve::fp::float_to_f16(f)}; }
inline float __half2float(__half h) { return voltserve::fp::f16_to_float(h.bits); }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }
