// CPU emulation of the Gated DeltaNet kernels: runs the block bodies of kernels/gdn/gdn_blocks.h over a plan's
// grids, one cooperative fiber (ucontext) per CUDA thread on the calling OS thread. __syncthreads is a barrier
// over the block's fibers and a warp shuffle an exchange between two barriers of the warp's 32 fibers, so the
// bodies get the synchronisation they get on a GPU and no more: between two barriers a fiber runs alone until it
// reaches the next one. Even blocks run their fibers in ascending thread order, odd blocks in descending order, so a
// missing barrier between a write and a read by another thread shows up in one of the two (the reader runs before
// the writer). Shared memory is refilled with NaN before every block, so a read of a value the block did not write
// reaches the results. A barrier that not every thread reaches aborts with a message (a deadlock on a GPU).
// Used by gdn_blocks_test.cpp ([unit]).
#pragma once

#include <ucontext.h>

#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "common/fp_formats.h"
#include "kernels/gdn/gdn_blocks.h"
#include "kernels/gdn/gdn_plan.h"

namespace voltserve::test {

class FiberBlock;

struct EmuCtx {
  int32_t tid;
  int32_t nthreads;
  FiberBlock* blk;
  void sync() const;
  float exchange(float v, int32_t src_lane) const;
  float shfl_xor(float v, int m) const { return exchange(v, (tid & 31) ^ m); }
  float shfl(float v, int src) const { return exchange(v, src); }
  void store_f16(uint16_t* p, float v) const { *p = fp::float_to_f16(v); }
  void dep_wait() const {}  // launches run one after another here: nothing to wait for
};

// One block's worth of fibers, reused for every block of a launch.
class FiberBlock {
 public:
  struct Barrier {
    int32_t expected = 0, arrived = 0;
    uint64_t generation = 0;
  };

  FiberBlock(int32_t threads, size_t smem_floats)
      : n_(threads),
        fibers_(static_cast<size_t>(threads)),
        xchg_(2 * static_cast<size_t>(threads)),
        smem_(smem_floats) {
    block_.expected = threads;
    warps_.resize(static_cast<size_t>((threads + 31) / 32));
    for (auto& w : warps_) w.expected = 32;
    for (auto& f : fibers_) f.stack.resize(kStackBytes);
  }

  // Runs body(ctx, smem) on every thread; descending thread order if `reverse`.
  template <class Body>
  void run(Body& body, bool reverse) {
    std::fill(smem_.begin(), smem_.end(), std::numeric_limits<float>::quiet_NaN());
    body_ = &body;
    invoke_ = [](void* b, EmuCtx& c, float* s) { (*static_cast<Body*>(b))(c, s); };
    reverse_ = reverse;
    for (int32_t t = 0; t < n_; ++t) {
      Fiber& f = fibers_[static_cast<size_t>(t)];
      f.done = false;
      f.wait = nullptr;
      getcontext(&f.uc);
      f.uc.uc_stack.ss_sp = f.stack.data();
      f.uc.uc_stack.ss_size = f.stack.size();
      f.uc.uc_link = nullptr;  // entry() never returns: it switches to the next fiber or back to main_
      const uintptr_t self = reinterpret_cast<uintptr_t>(this);
      makecontext(&f.uc, reinterpret_cast<void (*)()>(&FiberBlock::entry), 3, static_cast<uint32_t>(self >> 32),
                  static_cast<uint32_t>(self & 0xFFFFFFFFu), t);
    }
    remaining_ = n_;
    current_ = reverse ? n_ - 1 : 0;
    swapcontext(&main_, &fibers_[static_cast<size_t>(current_)].uc);
  }

  void arrive_and_wait(Barrier& b) {
    if (++b.arrived == b.expected) {
      b.arrived = 0;
      ++b.generation;  // releases the waiting fibers; the last one to arrive goes on
      return;
    }
    Fiber& f = fibers_[static_cast<size_t>(current_)];
    f.wait = &b;
    f.wait_gen = b.generation;
    const int32_t u = next_runnable(current_);
    if (u < 0) deadlock();
    current_ = u;
    swapcontext(&f.uc, &fibers_[static_cast<size_t>(u)].uc);
  }
  void sync() { arrive_and_wait(block_); }
  // Two exchange buffers used alternately: a lane can write the next exchange's value only after every lane has
  // arrived there, i.e. has read this one, so one barrier per shuffle suffices.
  float exchange(int32_t tid, float v, int32_t src_lane) {
    Barrier& w = warps_[static_cast<size_t>(tid / 32)];
    const size_t half = static_cast<size_t>(w.generation & 1) * static_cast<size_t>(n_);
    xchg_[half + static_cast<size_t>(tid)] = v;
    arrive_and_wait(w);
    return xchg_[half + static_cast<size_t>((tid & ~31) | (src_lane & 31))];
  }

 private:
  static constexpr size_t kStackBytes = 64 * 1024;
  struct Fiber {
    ucontext_t uc;
    std::vector<char> stack;
    bool done = false;
    Barrier* wait = nullptr;
    uint64_t wait_gen = 0;
  };

  static void entry(uint32_t hi, uint32_t lo, int32_t tid) {
    auto* self = reinterpret_cast<FiberBlock*>((static_cast<uintptr_t>(hi) << 32) | lo);
    EmuCtx ctx{tid, self->n_, self};
    self->invoke_(self->body_, ctx, self->smem_.data());
    self->fibers_[static_cast<size_t>(tid)].done = true;
    if (--self->remaining_ == 0) setcontext(&self->main_);
    const int32_t u = self->next_runnable(tid);
    if (u < 0) deadlock();
    self->current_ = u;
    setcontext(&self->fibers_[static_cast<size_t>(u)].uc);
  }

  bool runnable(const Fiber& f) const { return !f.done && (f.wait == nullptr || f.wait->generation != f.wait_gen); }
  // The first runnable fiber after `from` in this block's order (cyclic), or -1.
  int32_t next_runnable(int32_t from) {
    for (int32_t k = 1; k <= n_; ++k) {
      const int32_t t = reverse_ ? (from - k % n_ + n_) % n_ : (from + k) % n_;
      Fiber& f = fibers_[static_cast<size_t>(t)];
      if (runnable(f)) {
        f.wait = nullptr;
        return t;
      }
    }
    return -1;
  }
  [[noreturn]] static void deadlock() {
    std::fprintf(stderr, "gdn emulator: deadlock: a barrier that not every thread of the block reaches\n");
    std::abort();
  }

  int32_t n_;
  std::vector<Fiber> fibers_;
  std::vector<float> xchg_;
  std::vector<float> smem_;
  Barrier block_;
  std::vector<Barrier> warps_;
  ucontext_t main_;
  int32_t current_ = 0;
  int32_t remaining_ = 0;
  bool reverse_ = false;
  void* body_ = nullptr;
  void (*invoke_)(void*, EmuCtx&, float*) = nullptr;
};

inline void EmuCtx::sync() const { blk->sync(); }
inline float EmuCtx::exchange(float v, int32_t src_lane) const { return blk->exchange(tid, v, src_lane); }

// Runs body(ctx, bx, by, bz, smem) for every block of l's grid, blocks one after another.
template <class Body>
void emulate_launch(const kernels::gdn::Launch& l, Body body) {
  if (!l.run) return;
  FiberBlock blk(static_cast<int32_t>(l.threads), l.smem_bytes / sizeof(float) + 1);
  uint64_t block_index = 0;
  for (uint32_t bz = 0; bz < l.grid.z; ++bz) {
    for (uint32_t by = 0; by < l.grid.y; ++by) {
      for (uint32_t bx = 0; bx < l.grid.x; ++bx) {
        auto one = [&](EmuCtx& ctx, float* smem) {
          body(ctx, static_cast<int32_t>(bx), static_cast<int32_t>(by), static_cast<int32_t>(bz), smem);
        };
        blk.run(one, (block_index++ & 1) != 0);
      }
    }
  }
}

// gdn_forward on host memory: the same plan, the same block bodies.
inline kernels::KernelStatus emulate_forward(const kernels::gdn::Params& p, const kernels::gdn::DeviceArgs& a,
                                             const kernels::gdn::PlanOptions& opt = {}) {
  using namespace kernels::gdn;
  ForwardPlan plan;
  if (kernels::KernelStatus st = plan_forward(p, a, &plan, opt); !st.ok()) return st;
  const KernelArgs& k = plan.k;
  emulate_launch(plan.conv,
                 [&](EmuCtx& c, int32_t x, int32_t y, int32_t z, float* s) { conv_block(c, k, x, y, z, s); });
  emulate_launch(plan.recurrent,
                 [&](EmuCtx& c, int32_t x, int32_t y, int32_t, float* s) { recurrent_block(c, k, x, y, s); });
  emulate_launch(plan.prep,
                 [&](EmuCtx& c, int32_t x, int32_t y, int32_t z, float* s) { chunk_prep_block(c, k, x, y, z, s); });
  if (plan.pass_cols == 32) {
    emulate_launch(plan.state_pass, [&](EmuCtx& c, int32_t x, int32_t y, int32_t z, float* s) {
      state_pass_block<32>(c, k, x, y, z, s);
    });
  } else {
    emulate_launch(plan.state_pass, [&](EmuCtx& c, int32_t x, int32_t y, int32_t z, float* s) {
      state_pass_block<16>(c, k, x, y, z, s);
    });
  }
  emulate_launch(plan.norm, [&](EmuCtx& c, int32_t x, int32_t y, int32_t, float*) { chunked_norm_block(c, k, x, y); });
  return kernels::KernelStatus::Ok();
}

// As gdn.cu's commit: one launch per kMaxCommitLayers layers.
inline kernels::KernelStatus emulate_commit(const kernels::gdn::Params& p, const kernels::gdn::State* layers,
                                            int32_t n_layers, const kernels::gdn::Commit* commits, int32_t n_commits) {
  using namespace kernels::gdn;
  for (int32_t l0 = 0; l0 < n_layers; l0 += kMaxCommitLayers) {
    CommitPlan plan;
    const int32_t n = std::min(n_layers - l0, kMaxCommitLayers);
    if (kernels::KernelStatus st = plan_commit(p, layers + l0, n, commits, n_commits, nullptr, &plan); !st.ok()) {
      return st;
    }
    emulate_launch(plan.copy,
                   [&](EmuCtx& c, int32_t x, int32_t y, int32_t z, float*) { commit_block(c, plan.k, x, y, z); });
  }
  return kernels::KernelStatus::Ok();
}

}  // namespace voltserve::test
