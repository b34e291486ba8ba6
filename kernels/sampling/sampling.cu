// Device sampling (sampling.h): the processing chain, the draw and the logprobs of every output row in two launches,
// plus the penalty-state updates. Portable (FMA, shuffles, shared-memory atomics: sm_70 up). The arithmetic and
// every decision come from sampling_math.h, whose CPU model is tested against sample_ref; the device results are
// compared with sample_ref by tests/kernels/sampling_gpu_test.cpp.
//
// Launch 1, scan_kernel: grid (slices, rows), 256 threads. A block reads one slice of kSliceSize = 4096 logits of
//   a row (16 KB, 16 coalesced loads in flight per thread), applies logit_bias (a slice bitmap in shared memory
//   says which ids have entries) and the penalties (the slot's counts and prompt bits, read only for penalized
//   rows), and writes a SliceStat: first NaN, argmax (ties to the lowest id), survivor counts, the slice's softmax
//   sum relative to its own maximum (rows that need the total), the raw max and sum (logprobs), and its top 64
//   processed and top 20 raw (value, id) pairs, selected by a radix descent over the composite keys in shared
//   memory. Traffic per row: the logits once (plus the counts once for penalized rows) and ~44 KB of statistics.
// Launch 2, finish_kernel: one block of 512 threads per row. plan_row decides from the row's SliceStats: done
//   (not sampled, NaN, nothing samplable, greedy), a walk in id order (no filter: over the candidates, or over the
//   one slice where the cumulative mass passes u * total, re-read and scanned), or the pick over the row's top 64
//   candidates (merged from the slices, exact: the reference's roundings), which covers top-k <= 64 and top-p /
//   min-p cuts within the 64 most likely. Rows whose cut lies past the candidates take the general path: radix
//   descents over the whole row (4 levels of 8 bits of the order key, per-bin counts and fixed-point masses), each
//   level one pass over the row's logits (from L2 or HBM), asked by the general_next driver: the totals (1 pass),
//   the top-k cut, the top-p cut and the draw (3 passes each), the tie's id (1 pass and one chunk): at most 11
//   passes (14 when the draw lands past the end by rounding). The raw top-n logprobs merge the slices' raw
//   candidates the same way. A draft row (RowParams::draft, speculative acceptance) is judged where the draw
//   would be made: over the candidates (exact_accept), in id order with the draft's weight read from its logit
//   (plan_row_tail; the walk skips the draft after a rejection), or on the general path (one more pass: the
//   draft's rank, then the draw around it).
// A penalized row's counts are the slot's plus its pending ids (RowParams::pending_*: a verify row's drafts before
// it), compared per element (at most 15 of them).
// update_penalties_kernel: one block of 128 threads per SeqDesc, atomics (a sequence's rows, repeated ids);
// count_generated_kernel: one warp adds a verify item's accepted drafts.
// reset_penalties: two memsets. Results are deterministic: integer atomics only, doubles summed in fixed orders.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "sampling/philox.h"
#include "sampling/sampling.h"
#include "sampling/sampling_math.h"

namespace voltserve::kernels::sampling {

namespace {

constexpr uint32_t kFull = 0xFFFFFFFFu;
constexpr int kScanThreads = 256;
constexpr int kScanPerThread = kSliceSize / kScanThreads;  // 16
constexpr int kFinishThreads = 512;
constexpr int kFinishWarps = kFinishThreads / 32;
constexpr int kPassUnroll = 8;                         // elements per thread per chunk of a general-path pass
constexpr int kChunk = kFinishThreads * kPassUnroll;  // 4096 ids
constexpr int kMaxChunks = kMaxVocab / kChunk;
static_assert(kChunk == kSliceSize, "the walk scans one slice as one chunk");
static_assert(kSliceSize % 32 == 0 && kMaxVocab % kChunk == 0, "whole bitmap words and chunks");

using ull = unsigned long long;
static_assert(sizeof(ull) == sizeof(uint64_t), "64-bit atomics on uint64_t storage");

// ---- Workspace: per row and slice a SliceStat, kCandidates processed and kMaxTopLogprobs raw composite keys
// (the layout is in sampling_math.h so that host code without CUDA can size it).
using Layout = WorkspaceLayout;
Layout layout(int32_t n_rows, int32_t n_vocab) { return workspace_layout(n_rows, n_vocab); }

struct Params {
  const float* logits;
  int64_t stride;
  int32_t n_vocab;
  int32_t n_slices;
  const RowParams* rows;
  const int32_t* bias_ids;
  const float* bias_values;
  PenaltyState pen;
  const uint32_t* masks;  // token masks (RowParams::mask_row), mask_words per row; null: none
  int32_t mask_words;
  Outputs out;
  SliceStat* stats;   // [rows, slices]
  uint64_t* cand;     // [rows, slices, kCandidates]
  uint64_t* raw_cand;  // [rows, slices, kMaxTopLogprobs]
};

// ---- Warp and block helpers (every lane of the warp / thread of the block calls them).
__device__ int lane_id() { return static_cast<int>(threadIdx.x & 31); }

template <class T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}
__device__ uint64_t warp_max_u64(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t t = __shfl_xor_sync(kFull, v, o);
    v = t > v ? t : v;
  }
  return v;
}
__device__ int32_t warp_min_i32(int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ int32_t warp_max_i32(int32_t v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Sum of v over the block in a fixed order (lane butterflies, then warps in order): deterministic.
template <int kThreads>
__device__ double block_sum(double v, double* scratch, double* result) {
  v = warp_sum(v);
  if (lane_id() == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < kThreads / 32; ++w) s += scratch[w];
    *result = s;
  }
  __syncthreads();
  return *result;
}

// hist[bin] += 1 for every active lane; lanes of one bin add with one atomic (the bins are few and crowded).
__device__ void warp_count_add(bool active, uint32_t bin, uint32_t* hist) {
  const uint32_t act = __ballot_sync(kFull, active);
  if (!active) return;
  const uint32_t peers = __match_any_sync(act, bin);
  if (lane_id() == __ffs(peers) - 1) atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(peers)));
}

// count[bin] += 1 and mass[bin] += m for every active lane, one pair of atomics per distinct bin of the warp.
__device__ void warp_hist_add(bool active, uint32_t bin, uint64_t m, uint32_t* count, uint64_t* mass) {
  uint32_t remaining = __ballot_sync(kFull, active);
  while (remaining != 0) {
    const int leader = __ffs(remaining) - 1;
    const uint32_t b = __shfl_sync(kFull, bin, leader);
    const bool mine = active && bin == b;
    const uint32_t members = __ballot_sync(kFull, mine);
    const uint64_t sum = warp_sum<uint64_t>(mine ? m : 0);
    if (lane_id() == leader) {
      atomicAdd(&count[b], static_cast<uint32_t>(__popc(members)));
      atomicAdd(reinterpret_cast<ull*>(&mass[b]), static_cast<ull>(sum));
    }
    remaining &= ~members;
  }
}

// One radix-descent level (descend_bins over bins 255..0) by one warp: lane l sums bins 255-8l .. 248-8l, a scan
// over the lanes finds the first lane whose bins reach the target, and that lane scans its 8 bins. The same bin as
// the sequential scan: "reached" is monotone in the running sums, and the first non-empty bin that reaches it lies
// in the first non-empty lane whose running sum reaches it.
struct Decision {
  int32_t found;
  int32_t bin;
  uint64_t count_above;
  uint64_t mass_above;
};

__device__ void warp_decide(const uint32_t* count, const uint64_t* mass, SelectMode mode, uint64_t target,
                            uint64_t base_count, uint64_t base_mass, Decision* out) {
  const int lane = lane_id();
  const int hi = 255 - 8 * lane;
  uint64_t sc = 0, sm = 0;
  for (int j = 0; j < 8; ++j) {
    sc += count[hi - j];
    if (mass != nullptr) sm += mass[hi - j];
  }
  uint64_t ic = sc, im = sm;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t tc = __shfl_up_sync(kFull, ic, o);
    const uint64_t tm = __shfl_up_sync(kFull, im, o);
    if (lane >= o) {
      ic += tc;
      im += tm;
    }
  }
  const bool hit = sc > 0 && select_reached(mode, target, base_count + ic, base_mass + im);
  const uint32_t ballot = __ballot_sync(kFull, hit);
  if (ballot == 0) {
    if (lane == 0) out->found = 0;
    return;
  }
  if (lane == __ffs(ballot) - 1) {
    uint64_t c = base_count + ic - sc, m = base_mass + im - sm;
    int32_t bin = -1;
    out->found = descend_bins(count, mass, hi, hi - 7, mode, target, &c, &m, &bin) ? 1 : 0;
    out->bin = bin;
    out->count_above = c;
    out->mass_above = m;
  }
}

struct SelectSmem {
  uint32_t hist[256];
  Decision dec;
  uint32_t count;
};

// The cut of the `want` largest of comp(0..n), composite keys (distinct; 0: not a candidate; n_valid of them
// non-zero, n_valid > want): a key t such that exactly `want` keys are >= t. Radix descent over the 64-bit keys, 8
// bits a level, until the bin at the cut is taken whole.
template <int kThreads, class Comp>
__device__ uint64_t block_cut(const Comp& comp, int32_t n, int32_t want, SelectSmem& sm) {
  uint64_t prefix = 0, need = static_cast<uint64_t>(want);
  for (int level = 0; level < 8; ++level) {
    const int shift = 56 - 8 * level;
    for (int i = threadIdx.x; i < 256; i += kThreads) sm.hist[i] = 0;
    __syncthreads();
    for (int32_t base = 0; base < n; base += kThreads) {
      const int32_t e = base + static_cast<int32_t>(threadIdx.x);
      const uint64_t c = e < n ? comp(e) : 0;
      const bool match = c != 0 && (level == 0 || (c >> (shift + 8)) == (prefix >> (shift + 8)));
      warp_count_add(match, static_cast<uint32_t>((c >> shift) & 255), sm.hist);
    }
    __syncthreads();
    if (threadIdx.x < 32) warp_decide(sm.hist, nullptr, SelectMode::kCount, need, 0, 0, &sm.dec);
    __syncthreads();
    const Decision d = sm.dec;
    if (!d.found) break;  // cannot happen (n_valid > want keys match); never index hist with it
    prefix |= static_cast<uint64_t>(d.bin) << shift;
    need -= d.count_above;
    const bool whole_bin = need == sm.hist[d.bin];
    __syncthreads();  // hist and dec read by all before the next level clears them (or the caller reuses sm)
    if (whole_bin) break;
  }
  return prefix;
}

// Writes to out (unordered) the keys comp(e) >= cut, at most `take` of them.
template <int kThreads, class Comp>
__device__ void block_gather(const Comp& comp, int32_t n, uint64_t cut, int32_t take, uint64_t* out, SelectSmem& sm) {
  if (threadIdx.x == 0) sm.count = 0;
  __syncthreads();
  for (int32_t e = threadIdx.x; e < n; e += kThreads) {
    const uint64_t c = comp(e);
    if (c != 0 && c >= cut) {
      const uint32_t slot = atomicAdd(&sm.count, 1u);
      if (slot < static_cast<uint32_t>(take)) out[slot] = c;
    }
  }
  __syncthreads();
}

// Writes to out (unordered) the min(want, n_valid) largest of comp(0..n) (see block_cut); returns how many.
template <int kThreads, class Comp>
__device__ int32_t block_select(const Comp& comp, int32_t n, int32_t n_valid, int32_t want, uint64_t* out,
                                SelectSmem& sm) {
  const int32_t take = want < n_valid ? want : n_valid;
  if (take <= 0) return 0;
  const uint64_t cut = n_valid > want ? block_cut<kThreads>(comp, n, want, sm) : 1;
  block_gather<kThreads>(comp, n, cut, take, out, sm);
  return take;
}

// block_select for a slice, with a prefilter: the want-th largest of the threads' own maxima (thread_max: the
// largest comp of the thread's elements, 0 if none) is at most the want-th largest key, since that many keys reach
// it; only the keys at or above it (typically a few times `want`) go through the descent, from `buf`. Falls back to
// the whole slice if more than kPrefilterCap pass.
constexpr int kPrefilterCap = 512;
struct PrefilterSmem {
  uint64_t maxima[kScanThreads];
  uint64_t buf[kPrefilterCap];
};

template <int kThreads, class Comp>
__device__ int32_t slice_select(const Comp& comp, int32_t n, int32_t n_valid, int32_t want, uint64_t thread_max,
                                uint64_t* out, SelectSmem& sm, PrefilterSmem& pf) {
  static_assert(kThreads <= kScanThreads, "one maximum per thread");
  const int32_t take = want < n_valid ? want : n_valid;
  if (take <= 0) return 0;
  if (n_valid <= want) {
    block_gather<kThreads>(comp, n, 1, take, out, sm);
    return take;
  }
  pf.maxima[threadIdx.x] = thread_max;
  const int32_t n_maxima = __syncthreads_count(thread_max != 0);
  if (n_maxima < want) return block_select<kThreads>(comp, n, n_valid, want, out, sm);
  const uint64_t floor =
      n_maxima > want ? block_cut<kThreads>([&](int32_t e) { return pf.maxima[e]; }, kThreads, want, sm) : 1;
  // Compact the keys >= floor into buf (warp-aggregated appends; order does not matter).
  if (threadIdx.x == 0) sm.count = 0;
  __syncthreads();
  for (int32_t base = 0; base < n; base += kThreads) {
    const int32_t e = base + static_cast<int32_t>(threadIdx.x);
    const uint64_t c = e < n ? comp(e) : 0;
    const bool keep = c != 0 && c >= floor;
    const uint32_t mask = __ballot_sync(kFull, keep);
    uint32_t first = 0;
    if (lane_id() == 0 && mask != 0) first = atomicAdd(&sm.count, static_cast<uint32_t>(__popc(mask)));
    first = __shfl_sync(kFull, first, 0);
    const uint32_t slot = first + static_cast<uint32_t>(__popc(mask & ((1u << lane_id()) - 1u)));
    if (keep && slot < static_cast<uint32_t>(kPrefilterCap)) pf.buf[slot] = c;
  }
  __syncthreads();
  const int32_t m = static_cast<int32_t>(sm.count);
  __syncthreads();  // count read by all before block_select resets it
  if (m > kPrefilterCap) return block_select<kThreads>(comp, n, n_valid, want, out, sm);
  return block_select<kThreads>([&](int32_t e) { return pf.buf[e]; }, m, m, want, out, sm);
}

// Sorts keys[0, n) (n <= blockDim.x, distinct) into out: descending composite keys, or ascending ids when by_id;
// only the valid(key) ones, in order; returns how many.
template <class Valid>
__device__ int32_t block_rank_sort(const uint64_t* keys, int32_t n, bool by_id, const Valid& valid, uint64_t* out,
                                   int32_t* n_out) {
  if (threadIdx.x == 0) *n_out = 0;
  __syncthreads();
  const int32_t j = static_cast<int32_t>(threadIdx.x);
  if (j < n && valid(keys[j])) {
    int32_t rank = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (i == j || !valid(keys[i])) continue;
      rank += by_id ? (composite_id(keys[i]) < composite_id(keys[j])) : (keys[i] > keys[j]);
    }
    out[rank] = keys[j];
    atomicAdd(n_out, 1);
  }
  __syncthreads();
  return *n_out;
}

// Marks in bits (one per id of [lo, lo + len)) the ids with logit_bias entries.
template <int kThreads>
__device__ void build_bias_bits(const RowProcess& rp, int32_t lo, int32_t len, uint32_t* bits) {
  for (int32_t i = threadIdx.x; i < (len + 31) / 32; i += kThreads) bits[i] = 0;
  __syncthreads();
  for (int32_t b = threadIdx.x; b < rp.bias_count; b += kThreads) {
    const int32_t id = rp.bias_ids[b];
    if (id >= lo && id < lo + len) atomicOr(&bits[(id - lo) >> 5], 1u << ((id - lo) & 31));
  }
  __syncthreads();
}

// The processed logit of id from its raw value and penalty state (loaded by the caller); bits: the bias bitmap
// of ids from bits_lo on (null: no entries).
__device__ float element_value(const RowProcess& rp, const uint32_t* bits, int32_t bits_lo, int32_t id, float raw,
                               int32_t count, uint32_t prompt_word) {
  const int32_t b = id - bits_lo;
  const bool biased = bits != nullptr && ((bits[b >> 5] >> (b & 31)) & 1u) != 0;
  return process_value(raw, id, biased, count, prompt_bit(prompt_word, id), rp);
}

// Loads the penalty state of id (zeros where it has none).
__device__ void load_penalty(const RowProcess& rp, int32_t id, bool in_range, int32_t* count, uint32_t* word) {
  *count = 0;
  *word = 0;
  if (in_range && has_penalty_state(rp, id)) {
    *count = penalty_count(rp, id, __ldg(rp.counts + id));
    if (rp.rep_on) *word = __ldg(rp.prompt_bits + (id >> 5));
  }
}

// ---- Launch 1.
struct ScanSmem {
  float raw[kSliceSize];
  float pv[kSliceSize];  // processed; -inf: not a survivor
  uint32_t bias_bits[kSliceSize / 32];
  SelectSmem sel;
  PrefilterSmem pf;
  double scratch[kScanThreads / 32];
  double sum;
  ull best;  // max composite key over survivors
  int32_t nan_e;
  int32_t n_surv, n_posinf;
  uint32_t raw_max_key;
};

__global__ void __launch_bounds__(kScanThreads, 3) scan_kernel(const Params p) {
  const int32_t r = static_cast<int32_t>(blockIdx.y), s = static_cast<int32_t>(blockIdx.x);
  const RowParams row = p.rows[r];
  const RowNeeds needs = row_needs(row);
  if (!needs.sample) return;
  __shared__ ScanSmem sm;
  const int32_t lo = s * kSliceSize;
  const int32_t len = min(kSliceSize, p.n_vocab - lo);
  const RowProcess rp = row_process(row, p.bias_ids, p.bias_values, p.pen, p.n_vocab, p.masks, p.mask_words);
  const int tid = static_cast<int>(threadIdx.x);
  if (rp.bias_count > 0) build_bias_bits<kScanThreads>(rp, lo, len, sm.bias_bits);
  if (tid == 0) {
    sm.best = 0;
    sm.nan_e = INT_MAX;
    sm.n_surv = sm.n_posinf = 0;
    sm.raw_max_key = kNoKey;
  }
  // All 16 loads of a thread in flight before any use; the penalty state (penalized rows only) likewise.
  const float* src = p.logits + static_cast<int64_t>(r) * p.stride + lo;
#pragma unroll
  for (int k = 0; k < kScanPerThread; ++k) {
    const int e = tid + k * kScanThreads;
    if (e < len) sm.raw[e] = __ldg(src + e);
  }
  __syncthreads();  // sm initialised (the raw values are each thread's own)
  int32_t nan_e = INT_MAX, n_surv = 0, n_posinf = 0;
  uint64_t best = 0;
  uint32_t raw_max_key = kNoKey;
  const uint32_t* bits = rp.bias_count > 0 ? sm.bias_bits : nullptr;
  auto visit = [&](int e, int32_t count, uint32_t word) {
    const float raw = sm.raw[e];
    if (raw != raw && nan_e == INT_MAX) nan_e = e;
    raw_max_key = max(raw_max_key, order_key(raw != raw ? neg_inf() : raw));
    const float v = element_value(rp, bits, lo, lo + e, raw, count, word);
    sm.pv[e] = v;
    if (v > neg_inf()) {
      ++n_surv;
      n_posinf += v == pos_inf() ? 1 : 0;
      const uint64_t c = composite_key(order_key(v), lo + e);
      best = c > best ? c : best;
    }
  };
  if (rp.penalized) {
    int32_t cnt[kScanPerThread];
    uint32_t word[kScanPerThread];
#pragma unroll
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      load_penalty(rp, lo + e, e < len, &cnt[k], &word[k]);
    }
#pragma unroll
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      if (e < len) visit(e, cnt[k], word[k]);
    }
  } else {
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      if (e < len) visit(e, 0, 0u);
    }
  }
  nan_e = warp_min_i32(nan_e);
  best = warp_max_u64(best);
  n_surv = warp_sum(n_surv);
  n_posinf = warp_sum(n_posinf);
  raw_max_key = static_cast<uint32_t>(warp_max_u64(raw_max_key));
  if (lane_id() == 0) {
    atomicMin(&sm.nan_e, nan_e);
    atomicMax(&sm.best, static_cast<ull>(best));
    atomicAdd(&sm.n_surv, n_surv);
    atomicAdd(&sm.n_posinf, n_posinf);
    atomicMax(&sm.raw_max_key, raw_max_key);
  }
  __syncthreads();
  SliceStat st;
  st.nan_index = sm.nan_e == INT_MAX ? -1 : lo + sm.nan_e;
  st.max_key = sm.best != 0 ? composite_order(sm.best) : kNoKey;
  st.argmax = sm.best != 0 ? composite_id(sm.best) : -1;
  st.n_surv = sm.n_surv;
  st.n_posinf = sm.n_posinf;
  st.n_cand = 0;
  st.n_raw_cand = 0;
  st.raw_max = key_value(sm.raw_max_key);
  st.sum_t = 0.0;
  st.raw_sum = 0.0;
  const int64_t slot = static_cast<int64_t>(r) * p.n_slices + s;
  // Softmax sum relative to the slice's maximum (finite maxima only: a +inf row counts its +inf ids instead).
  if (needs.sums && st.max_key != kNoKey && st.max_key != pos_inf_key()) {
    const double inv_t = 1.0 / static_cast<double>(row.temperature);
    double local = 0.0;
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      if (e < len && sm.pv[e] > neg_inf()) local += slice_term(sm.pv[e], st.max_key, inv_t);
    }
    st.sum_t = block_sum<kScanThreads>(local, sm.scratch, &sm.sum);
  }
  // A thread's own largest key for slice_select's prefilter (its elements are e = tid + k * kScanThreads).
  auto thread_max = [&](const auto& comp) {
    uint64_t m = 0;
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      const uint64_t c = e < len ? comp(e) : 0;
      m = c > m ? c : m;
    }
    return m;
  };
  if (needs.candidates) {
    const ScanSmem& cs = sm;
    const auto comp = [&](int32_t e) -> uint64_t {
      const float v = cs.pv[e];
      return v > neg_inf() ? composite_key(order_key(v), lo + e) : 0;
    };
    st.n_cand = slice_select<kScanThreads>(comp, len, st.n_surv, kCandidates, thread_max(comp),
                                           p.cand + slot * kCandidates, sm.sel, sm.pf);
  }
  if (needs.raw && finite_float(st.raw_max)) {
    double local = 0.0;
    for (int k = 0; k < kScanPerThread; ++k) {
      const int e = tid + k * kScanThreads;
      if (e < len) local += raw_term(sm.raw[e] != sm.raw[e] ? neg_inf() : sm.raw[e], st.raw_max);
    }
    st.raw_sum = block_sum<kScanThreads>(local, sm.scratch, &sm.sum);
  }
  if (needs.raw_candidates) {
    const ScanSmem& cs = sm;
    const auto comp = [&](int32_t e) -> uint64_t {
      const float v = cs.raw[e];
      return composite_key(order_key(v != v ? neg_inf() : v), lo + e);
    };
    st.n_raw_cand = slice_select<kScanThreads>(comp, len, len, kMaxTopLogprobs, thread_max(comp),
                                               p.raw_cand + slot * kMaxTopLogprobs, sm.sel, sm.pf);
  }
  if (tid == 0) p.stats[slot] = st;
}

// ---- Launch 2.
// Shared memory of the finish kernel: `area` is reused by the phases of a row in turn (raw candidates; processed
// candidates; the walked slice; the general path's bias bitmap and histograms).
constexpr int kAreaBytes = 40960;
constexpr int kGeneralHistOffset = kMaxVocab / 8;  // after the whole-row bias bitmap (one bit per id)
static_assert(kFinishThreads >= kMaxSlices && kFinishThreads >= kCandidates, "a thread per slice, per candidate");
static_assert(kMaxSlices * kCandidates * 8 <= kAreaBytes, "processed candidates fit");
static_assert(kMaxSlices * kMaxTopLogprobs * 8 <= kAreaBytes, "raw candidates fit");
static_assert(kSliceSize * 4 <= kAreaBytes, "a slice of values fits");
static_assert(kGeneralHistOffset + 256 * (4 + 8) * 2 <= kAreaBytes, "bitmap and two histograms fit");

struct FinishSmem {
  RowPlan plan;
  double mass[kMaxSlices];       // slice_mass per slice
  double lse_terms[kMaxSlices];  // lse_term per slice
  float raw_max;
  double lse;
  int32_t token;
  int32_t n_sorted;
  int32_t offsets[kMaxSlices + 1];
  uint64_t top[kCandidates];
  uint64_t sorted[kCandidates];
  int32_t ids[kCandidates];
  double w[kCandidates];
  SelectSmem sel;
  double scratch[kFinishWarps];
  int32_t walk_hit, walk_last;
  // The general path's answers.
  Decision dec;
  ull total, n_min_p, mass_min_p;
  ull rank_count, rank_mass;
  uint32_t chunk_ties[kMaxChunks];
  int32_t tie_chunk;
  uint32_t tie_rest;
  uint32_t warp_ties[kFinishWarps];
  int32_t result;
};

// The general path over row r: every thread of the block runs general_next and the passes that answer it.
struct GeneralPath {
  const float* logits;  // the row
  int32_t n;
  RowProcess rp;
  const uint32_t* bits;  // whole-row bias bitmap, or null
  Softmax softmax;
  float min_p;
  uint32_t* hc;  // this pass's histogram
  uint64_t* hm;
  uint32_t* hc0;  // level 0, from the totals pass
  uint64_t* hm0;
  FinishSmem* f;

  // The processed values of this thread's kPassUnroll ids of the chunk at base (ids past the row: -inf).
  __device__ void chunk_values(int32_t base, float (&v)[kPassUnroll]) const {
    float raw[kPassUnroll];
    int32_t cnt[kPassUnroll];
    uint32_t word[kPassUnroll];
#pragma unroll
    for (int k = 0; k < kPassUnroll; ++k) {
      const int32_t id = base + static_cast<int32_t>(threadIdx.x) + k * kFinishThreads;
      raw[k] = id < n ? __ldg(logits + id) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPassUnroll; ++k) {
      const int32_t id = base + static_cast<int32_t>(threadIdx.x) + k * kFinishThreads;
      load_penalty(rp, id, id < n, &cnt[k], &word[k]);
    }
#pragma unroll
    for (int k = 0; k < kPassUnroll; ++k) {
      const int32_t id = base + static_cast<int32_t>(threadIdx.x) + k * kFinishThreads;
      v[k] = id < n ? element_value(rp, bits, 0, id, raw[k], cnt[k], word[k]) : neg_inf();
    }
  }

  __device__ GeneralTotals totals() const {
    for (int i = threadIdx.x; i < 256; i += kFinishThreads) {
      hc0[i] = 0;
      hm0[i] = 0;
    }
    if (threadIdx.x == 0) f->total = f->n_min_p = f->mass_min_p = 0;
    __syncthreads();
    uint64_t total = 0, n_min_p = 0, mass_min_p = 0;
    for (int32_t base = 0; base < n; base += kChunk) {
      float v[kPassUnroll];
      chunk_values(base, v);
#pragma unroll
      for (int k = 0; k < kPassUnroll; ++k) {
        const bool surv = is_survivor(v[k], softmax);
        uint64_t wfx = 0;
        if (surv) {
          const double w = weight(v[k], softmax);
          wfx = to_fixed(w);
          total += wfx;
          if (w >= static_cast<double>(min_p)) {
            ++n_min_p;
            mass_min_p += wfx;
          }
        }
        warp_hist_add(surv, surv ? order_key(v[k]) >> 24 : 0, wfx, hc0, hm0);
      }
    }
    total = warp_sum(total);
    n_min_p = warp_sum(n_min_p);
    mass_min_p = warp_sum(mass_min_p);
    if (lane_id() == 0) {
      atomicAdd(&f->total, static_cast<ull>(total));
      atomicAdd(&f->n_min_p, static_cast<ull>(n_min_p));
      atomicAdd(&f->mass_min_p, static_cast<ull>(mass_min_p));
    }
    __syncthreads();
    GeneralTotals t;
    t.total = f->total;
    t.n_min_p = f->n_min_p;
    t.mass_min_p = f->mass_min_p;
    __syncthreads();
    return t;
  }

  __device__ Descent descent(SelectMode mode, uint64_t target) const {
    Descent r;
    uint32_t prefix = 0;
    uint64_t ca = 0, ma = 0;
    for (int level = 0; level < 4; ++level) {
      const int shift = 24 - 8 * level;
      const uint32_t* count = hc0;
      const uint64_t* mass = hm0;
      if (level > 0) {
        for (int i = threadIdx.x; i < 256; i += kFinishThreads) {
          hc[i] = 0;
          hm[i] = 0;
        }
        __syncthreads();
        for (int32_t base = 0; base < n; base += kChunk) {
          float v[kPassUnroll];
          chunk_values(base, v);
#pragma unroll
          for (int k = 0; k < kPassUnroll; ++k) {
            const uint32_t key = order_key(v[k]);
            const bool in = is_survivor(v[k], softmax) && (key >> (shift + 8)) == (prefix >> (shift + 8));
            const uint64_t wfx = in ? to_fixed(weight(v[k], softmax)) : 0;
            warp_hist_add(in, (key >> shift) & 255, wfx, hc, hm);
          }
        }
        __syncthreads();
        count = hc;
        mass = hm;
      }
      if (threadIdx.x < 32) warp_decide(count, mass, mode, target, ca, ma, &f->dec);
      __syncthreads();
      const Decision d = f->dec;
      if (!d.found) {
        __syncthreads();
        return r;
      }
      prefix |= static_cast<uint32_t>(d.bin) << shift;
      ca = d.count_above;
      ma = d.mass_above;
      if (level == 3) {
        r.found = true;
        r.tau = prefix;
        r.count_above = ca;
        r.mass_above = ma;
        r.n_ties = count[d.bin];
        r.w_tie = mass[d.bin] / r.n_ties;
        r.tie = tie_position(mode, target, ca, ma, r.w_tie, r.n_ties);
      }
      __syncthreads();  // dec and the histogram read by all before they are reused
    }
    return r;
  }

  // The survivors before (key, id) in the order (value desc, id asc): their count and fixed-point mass.
  __device__ GeneralRank rank(uint32_t key, int32_t id) const {
    if (threadIdx.x == 0) {
      f->rank_count = 0;
      f->rank_mass = 0;
    }
    __syncthreads();
    uint64_t count = 0, mass = 0;
    for (int32_t base = 0; base < n; base += kChunk) {
      float v[kPassUnroll];
      chunk_values(base, v);
#pragma unroll
      for (int k = 0; k < kPassUnroll; ++k) {
        const int32_t e = base + static_cast<int32_t>(threadIdx.x) + k * kFinishThreads;
        const uint32_t ek = order_key(v[k]);
        if (is_survivor(v[k], softmax) && (ek > key || (ek == key && e < id))) {
          ++count;
          mass += to_fixed(weight(v[k], softmax));
        }
      }
    }
    count = warp_sum(count);
    mass = warp_sum(mass);
    if (lane_id() == 0) {
      atomicAdd(&f->rank_count, static_cast<ull>(count));
      atomicAdd(&f->rank_mass, static_cast<ull>(mass));
    }
    __syncthreads();
    const GeneralRank r{f->rank_count, f->rank_mass};
    __syncthreads();
    return r;
  }

  // The index-th (0-based) survivor with key tau in ascending id order: counts per chunk, then one chunk in order.
  __device__ int32_t tie(uint32_t tau, uint64_t index) const {
    const int32_t n_chunks = (n + kChunk - 1) / kChunk;
    for (int i = threadIdx.x; i < n_chunks; i += kFinishThreads) f->chunk_ties[i] = 0;
    __syncthreads();
    for (int32_t base = 0; base < n; base += kChunk) {
      float v[kPassUnroll];
      chunk_values(base, v);
      uint32_t c = 0;
#pragma unroll
      for (int k = 0; k < kPassUnroll; ++k) c += is_survivor(v[k], softmax) && order_key(v[k]) == tau ? 1u : 0u;
      c = warp_sum(c);
      if (lane_id() == 0 && c > 0) atomicAdd(&f->chunk_ties[base / kChunk], c);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      uint64_t before = 0;
      f->tie_chunk = -1;
      for (int32_t c = 0; c < n_chunks; ++c) {
        if (before + f->chunk_ties[c] > index) {
          f->tie_chunk = c;
          f->tie_rest = static_cast<uint32_t>(index - before);
          break;
        }
        before += f->chunk_ties[c];
      }
      f->result = -1;
    }
    __syncthreads();
    const int32_t chunk = f->tie_chunk;
    if (chunk < 0) {
      __syncthreads();
      return -1;
    }
    const uint32_t rest = f->tie_rest;
    float v[kPassUnroll];
    chunk_values(chunk * kChunk, v);
    // Ids of the chunk in order: k-th round of kFinishThreads consecutive ids, thread order within a round.
    uint32_t seen = 0;
    for (int k = 0; k < kPassUnroll; ++k) {
      const bool is_tie = is_survivor(v[k], softmax) && order_key(v[k]) == tau;
      const uint32_t ballot = __ballot_sync(kFull, is_tie);
      const int warp = static_cast<int>(threadIdx.x / 32);
      if (lane_id() == 0) f->warp_ties[warp] = static_cast<uint32_t>(__popc(ballot));
      __syncthreads();
      uint32_t before = seen, round = 0;
      for (int w = 0; w < kFinishWarps; ++w) {
        before += w < warp ? f->warp_ties[w] : 0;
        round += f->warp_ties[w];
      }
      before += static_cast<uint32_t>(__popc(ballot & ((1u << lane_id()) - 1u)));
      if (is_tie && before == rest) f->result = chunk * kChunk + static_cast<int32_t>(threadIdx.x) + k * kFinishThreads;
      seen += round;
      __syncthreads();  // warp_ties read by all before the next round
    }
    const int32_t id = f->result;
    __syncthreads();
    return id;
  }
};

// A draft row's processed logit of its draft (-inf past the real ids).
__device__ float row_draft_value(const Params& p, const RowParams& row, const float* logits) {
  if (row.draft >= p.n_vocab) return neg_inf();
  const RowProcess rp = row_process(row, p.bias_ids, p.bias_values, p.pen, p.n_vocab, p.masks, p.mask_words);
  int32_t cnt;
  uint32_t word;
  load_penalty(rp, row.draft, true, &cnt, &word);
  return process_value(__ldg(logits + row.draft), row.draft, rp.bias_count > 0, cnt, prompt_bit(word, row.draft), rp);
}

__global__ void __launch_bounds__(kFinishThreads, 1) finish_kernel(const Params p) {
  const int32_t r = static_cast<int32_t>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const RowParams row = p.rows[r];
  const RowNeeds needs = row_needs(row);
  __shared__ __align__(16) unsigned char area[kAreaBytes];
  __shared__ FinishSmem f;
  const SliceStat* stats = p.stats + static_cast<int64_t>(r) * p.n_slices;
  const float* logits = p.logits + static_cast<int64_t>(r) * p.stride;
  // The plan (plan_row split so that the per-slice exps run in parallel; the sums keep slice order).
  if (tid == 0) {
    f.plan = plan_row_head(row, stats, p.n_slices);
    f.raw_max = needs.raw && f.plan.status == kRowOk ? row_raw_max(stats, p.n_slices) : 0.0f;
  }
  __syncthreads();
  const bool planning = f.plan.path == kPathPlanning;
  const bool lse = needs.raw && f.plan.status == kRowOk;
  if (tid < p.n_slices) {
    if (planning) f.mass[tid] = slice_mass(stats[tid], f.plan.softmax);
    if (lse) f.lse_terms[tid] = lse_term(stats[tid], f.raw_max);
  }
  __syncthreads();
  if (tid == 0) {
    if (planning && row.draft >= 0) set_draft(f.plan, row_draft_value(p, row, logits));
    if (planning) plan_row_tail(row, stats, f.mass, p.n_slices, f.plan);
    f.token = f.plan.token;
    f.lse = lse ? lse_finish(f.raw_max, f.lse_terms, p.n_slices) : 0.0;
  }
  __syncthreads();
  const RowPlan plan = f.plan;
  auto any = [](uint64_t) { return true; };

  // Raw top-n logprobs (the row will have a token: every path below picks one when the plan is ok).
  if (needs.raw_candidates && plan.status == kRowOk) {
    uint64_t* raw = reinterpret_cast<uint64_t*>(area);
    if (tid == 0) {
      int32_t at = 0;
      for (int32_t s = 0; s < p.n_slices; ++s) {
        f.offsets[s] = at;
        at += stats[s].n_raw_cand;
      }
      f.offsets[p.n_slices] = at;
    }
    __syncthreads();
    for (int32_t i = tid; i < p.n_slices * kMaxTopLogprobs; i += kFinishThreads) {
      const int32_t s = i / kMaxTopLogprobs, j = i % kMaxTopLogprobs;
      if (j < f.offsets[s + 1] - f.offsets[s]) {
        raw[f.offsets[s] + j] = p.raw_cand[(static_cast<int64_t>(r) * p.n_slices + s) * kMaxTopLogprobs + j];
      }
    }
    __syncthreads();
    const int32_t total = f.offsets[p.n_slices];
    const int32_t k = block_select<kFinishThreads>([&](int32_t e) { return raw[e]; }, total, total,
                                                   top_logprob_count(row, p.n_vocab), f.top, f.sel);
    const int32_t n_sorted = block_rank_sort(f.top, k, false, any, f.sorted, &f.n_sorted);
    if (tid < n_sorted) {
      const uint64_t c = f.sorted[tid];
      if (p.out.top_ids != nullptr) p.out.top_ids[static_cast<int64_t>(r) * kMaxTopLogprobs + tid] = composite_id(c);
      if (p.out.top_logprobs != nullptr) {
        p.out.top_logprobs[static_cast<int64_t>(r) * kMaxTopLogprobs + tid] =
            raw_logprob(key_value(composite_order(c)), f.lse);
      }
    }
    __syncthreads();
  }

  bool general = plan.path == kPathGeneral;
  if (plan.path == kPathCandidates || plan.path == kPathWalkCandidates) {
    uint64_t* cand = reinterpret_cast<uint64_t*>(area);
    if (tid == 0) {
      int32_t at = 0;
      for (int32_t s = 0; s < p.n_slices; ++s) {
        f.offsets[s] = at;
        at += stats[s].n_cand;
      }
      f.offsets[p.n_slices] = at;
    }
    __syncthreads();
    for (int32_t i = tid; i < p.n_slices * kCandidates; i += kFinishThreads) {
      const int32_t s = i / kCandidates, j = i % kCandidates;
      if (j < f.offsets[s + 1] - f.offsets[s]) {
        cand[f.offsets[s] + j] = p.cand[(static_cast<int64_t>(r) * p.n_slices + s) * kCandidates + j];
      }
    }
    __syncthreads();
    const int32_t total = f.offsets[p.n_slices];
    const int32_t k =
        block_select<kFinishThreads>([&](int32_t e) { return cand[e]; }, total, total, kCandidates, f.top, f.sel);
    const bool walk = plan.path == kPathWalkCandidates;
    const bool inf_only = plan.softmax.has_pos_inf;
    const int32_t c = block_rank_sort(
        f.top, k, walk, [inf_only](uint64_t key) { return !inf_only || composite_order(key) == pos_inf_key(); },
        f.sorted, &f.n_sorted);
    if (tid < c) {
      f.ids[tid] = composite_id(f.sorted[tid]);
      f.w[tid] = weight(key_value(composite_order(f.sorted[tid])), plan.softmax);
    }
    __syncthreads();
    if (tid == 0) {
      if (row.draft >= 0) {
        f.token = walk ? accept_candidates(f.ids, f.w, c, row.draft, plan.u_accept, plan.v_resample)
                       : exact_accept(f.ids, f.w, c, plan.n_surv, row, plan.total, plan.u_accept, plan.v_resample);
      } else {
        f.token = walk ? walk_candidates(f.ids, f.w, c, plan.u)
                       : exact_pick(f.ids, f.w, c, plan.n_surv, row, plan.total, plan.u);
      }
    }
    __syncthreads();
    general = f.token == kNeedGeneral;
  } else if (plan.path == kPathWalkSlice) {
    // The ids of one slice in order: thread t holds ids lo + 8t .. lo + 8t + 7; the first id whose cumulative
    // weight (a block scan in double) passes the target; the slice's last survivor if none does (rounding).
    float* vals = reinterpret_cast<float*>(area);
    uint32_t* bits = reinterpret_cast<uint32_t*>(f.top);  // kSliceSize / 32 words = 512 bytes
    static_assert(sizeof(f.top) >= kSliceSize / 8, "slice bias bitmap fits");
    const int32_t lo = plan.walk_slice * kSliceSize;
    const int32_t len = min(kSliceSize, p.n_vocab - lo);
    const RowProcess rp = row_process(row, p.bias_ids, p.bias_values, p.pen, p.n_vocab, p.masks, p.mask_words);
    if (rp.bias_count > 0) build_bias_bits<kFinishThreads>(rp, lo, len, bits);
    for (int32_t e = tid; e < len; e += kFinishThreads) {
      int32_t cnt;
      uint32_t word;
      load_penalty(rp, lo + e, true, &cnt, &word);
      vals[e] = element_value(rp, rp.bias_count > 0 ? bits : nullptr, lo, lo + e, __ldg(logits + lo + e), cnt, word);
    }
    __syncthreads();
    constexpr int kPer = kSliceSize / kFinishThreads;
    double w[kPer];
    double local = 0.0;
    int32_t last = -1;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const int32_t e = tid * kPer + j;
      const bool surv = e < len && is_survivor(vals[e], plan.softmax) && lo + e != plan.skip;
      w[j] = surv ? weight(vals[e], plan.softmax) : -1.0;
      if (surv) {
        local += w[j];
        last = e;
      }
    }
    // Exclusive scan of the threads' sums: lanes, then warps (both in a fixed order).
    double incl = local;
    for (int o = 1; o < 32; o <<= 1) {
      const double t = __shfl_up_sync(kFull, incl, o);
      if (lane_id() >= o) incl += t;
    }
    const double lane_before = __shfl_up_sync(kFull, incl, 1);
    if (lane_id() == 31) f.scratch[tid / 32] = incl;
    __syncthreads();
    double before = 0.0;
    for (int wi = 0; wi < tid / 32; ++wi) before += f.scratch[wi];
    if (lane_id() > 0) before += lane_before;
    int32_t hit = INT_MAX;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (w[j] < 0.0 || hit != INT_MAX) continue;
      before += w[j];
      if (before > plan.walk_target) hit = tid * kPer + j;
    }
    hit = warp_min_i32(hit);
    last = warp_max_i32(last);
    if (tid == 0) {
      f.walk_hit = INT_MAX;
      f.walk_last = -1;
    }
    __syncthreads();
    if (lane_id() == 0) {
      atomicMin(&f.walk_hit, hit);
      atomicMax(&f.walk_last, last);
    }
    __syncthreads();
    if (tid == 0) f.token = lo + (f.walk_hit != INT_MAX ? f.walk_hit : f.walk_last);
    __syncthreads();
  }

  if (general) {
    const RowProcess rp = row_process(row, p.bias_ids, p.bias_values, p.pen, p.n_vocab, p.masks, p.mask_words);
    uint32_t* bits = reinterpret_cast<uint32_t*>(area);
    if (rp.bias_count > 0) build_bias_bits<kFinishThreads>(rp, 0, p.n_vocab, bits);
    GeneralPath gp{logits,
                   p.n_vocab,
                   rp,
                   rp.bias_count > 0 ? bits : nullptr,
                   plan.softmax,
                   row.min_p,
                   reinterpret_cast<uint32_t*>(area + kGeneralHistOffset),
                   reinterpret_cast<uint64_t*>(area + kGeneralHistOffset + 1024),
                   reinterpret_cast<uint32_t*>(area + kGeneralHistOffset + 3072),
                   reinterpret_cast<uint64_t*>(area + kGeneralHistOffset + 4096),
                   &f};
    General g = new_general(row, plan);
    for (;;) {
      general_next(g, row);
      if (g.ask == kAskDone) break;
      if (g.ask == kAskTotals) g.totals = gp.totals();
      if (g.ask == kAskDescent) g.answer = gp.descent(g.mode, g.target);
      if (g.ask == kAskTie) g.tie_id = gp.tie(g.tau, g.tie_index);
      if (g.ask == kAskRank) g.rank = gp.rank(g.draft_key, g.draft);
    }
    if (tid == 0) f.token = g.tie_id;
    __syncthreads();
  }

  if (tid == 0) {
    const int32_t token = plan.status == kRowOk ? f.token : -1;
    p.out.token[r] = token;
    p.out.status[r] = plan.status;
    if (plan.status == kNanLogits && p.out.nan_index != nullptr) p.out.nan_index[r] = plan.nan_index;
    if (needs.raw && plan.status == kRowOk && token >= 0 && p.out.logprob != nullptr) {
      p.out.logprob[r] = raw_logprob(__ldg(logits + token), f.lse);
    }
  }
}

// ---- Penalty state.
__global__ void update_penalties_kernel(const PenaltyState s, const int32_t* tokens, const SeqDesc* seqs,
                                        int32_t n_rows) {
  const SeqDesc q = seqs[blockIdx.x];
  if (q.slot < 0 || q.slot >= s.n_slots || q.n_tokens <= 0) return;
  const int32_t n_counted = q.n_tokens - (q.n_draft > 0 ? q.n_draft : 0);  // drafts: counted when accepted
  for (int32_t t = threadIdx.x; t < n_counted; t += blockDim.x) {
    const int32_t at = q.row0 + t;
    if (at < 0 || at >= n_rows) continue;
    const int32_t id = tokens[at];
    if (id < 0 || id >= s.vocab) continue;
    if (q.n_past + t < q.n_prompt) {
      atomicOr(&s.prompt_bits[static_cast<int64_t>(q.slot) * state_words(s) + id / 32], 1u << (id % 32));
    } else {
      atomicAdd(&s.counts[static_cast<int64_t>(q.slot) * s.vocab + id], 1);
    }
  }
}

__global__ void count_generated_kernel(const PenaltyState s, int32_t slot, const int32_t* ids, int32_t n) {
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int32_t id = ids[i];
    if (id >= 0 && id < s.vocab) atomicAdd(&s.counts[static_cast<int64_t>(slot) * s.vocab + id], 1);
  }
}

}  // namespace

KernelStatus sample(const DeviceArgs& a) {
  if (a.n_rows < 0 || a.n_rows > 65535) return VS_KERNEL_FAIL(kBadShape, "sample: n_rows must be in [0, 65535]");
  if (a.n_rows == 0) return KernelStatus::Ok();
  if (a.n_vocab_real < 1 || a.n_vocab_real > kMaxVocab) {
    return VS_KERNEL_FAIL(kBadShape, "sample: n_vocab_real must be in [1, 262144]");
  }
  if (a.logits_stride < a.n_vocab_real) return VS_KERNEL_FAIL(kBadShape, "sample: logits_stride < n_vocab_real");
  if (a.logits == nullptr || a.rows == nullptr) return VS_KERNEL_FAIL(kBadArgument, "sample: logits or rows is null");
  if (a.out.token == nullptr || a.out.status == nullptr) {
    return VS_KERNEL_FAIL(kBadArgument, "sample: out.token and out.status are required");
  }
  if (a.penalties.counts != nullptr &&
      (a.penalties.prompt_bits == nullptr || a.penalties.vocab < 1 || a.penalties.n_slots < 1)) {
    return VS_KERNEL_FAIL(kBadArgument, "sample: penalty state needs prompt_bits, vocab >= 1 and n_slots >= 1");
  }
  const Layout l = layout(a.n_rows, a.n_vocab_real);
  if (a.workspace == nullptr || a.workspace_bytes < l.total) {
    return VS_KERNEL_FAIL(kWorkspaceTooSmall, "sample: workspace smaller than workspace_bytes(n_rows, n_vocab_real)");
  }
  if ((reinterpret_cast<uintptr_t>(a.workspace) & 15) != 0) {
    return VS_KERNEL_FAIL(kBadArgument, "sample: workspace must be 16-byte aligned");
  }
  Params p;
  p.logits = a.logits;
  p.stride = a.logits_stride;
  p.n_vocab = a.n_vocab_real;
  p.n_slices = slice_count(a.n_vocab_real);
  p.rows = a.rows;
  p.bias_ids = a.bias_ids;
  p.bias_values = a.bias_values;
  p.pen = a.penalties;
  p.masks = a.masks;
  p.mask_words = a.mask_words;
  p.out = a.out;
  auto* base = static_cast<unsigned char*>(a.workspace);
  p.stats = reinterpret_cast<SliceStat*>(base + l.stats);
  p.cand = reinterpret_cast<uint64_t*>(base + l.cand);
  p.raw_cand = reinterpret_cast<uint64_t*>(base + l.raw_cand);
  const auto stream = static_cast<cudaStream_t>(a.stream);
  scan_kernel<<<dim3(static_cast<unsigned>(p.n_slices), static_cast<unsigned>(a.n_rows)), kScanThreads, 0, stream>>>(p);
  VS_CUDA_TRY(cudaGetLastError());
  finish_kernel<<<static_cast<unsigned>(a.n_rows), kFinishThreads, 0, stream>>>(p);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

KernelStatus count_generated(const PenaltyState& s, int32_t slot, const int32_t* ids, int32_t n, void* stream) {
  if (s.counts == nullptr || slot < 0 || slot >= s.n_slots || n <= 0) return KernelStatus::Ok();
  if (ids == nullptr || n > 1024) return VS_KERNEL_FAIL(kBadArgument, "count_generated: ids is null or n > 1024");
  count_generated_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(s, slot, ids, n);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

KernelStatus reset_penalties(const PenaltyState& s, int32_t slot, void* stream) {
  if (s.counts == nullptr || slot < 0 || slot >= s.n_slots) return KernelStatus::Ok();  // as reset_penalties_ref
  if (s.prompt_bits == nullptr || s.vocab < 1) {
    return VS_KERNEL_FAIL(kBadArgument, "reset_penalties: penalty state needs prompt_bits and vocab >= 1");
  }
  const auto st = static_cast<cudaStream_t>(stream);
  VS_CUDA_TRY(cudaMemsetAsync(s.counts + static_cast<int64_t>(slot) * s.vocab, 0,
                              static_cast<size_t>(s.vocab) * sizeof(int32_t), st));
  VS_CUDA_TRY(cudaMemsetAsync(s.prompt_bits + static_cast<int64_t>(slot) * state_words(s), 0,
                              static_cast<size_t>(state_words(s)) * sizeof(uint32_t), st));
  return KernelStatus::Ok();
}

KernelStatus update_penalties(const PenaltyState& s, const int32_t* tokens, const SeqDesc* seqs, int32_t n_seqs,
                              int32_t n_rows, void* stream) {
  if (s.counts == nullptr || n_seqs == 0) return KernelStatus::Ok();  // as update_penalties_ref
  if (n_seqs < 0 || n_rows < 0) return VS_KERNEL_FAIL(kBadShape, "update_penalties: n_seqs and n_rows must be >= 0");
  if (s.prompt_bits == nullptr || s.vocab < 1) {
    return VS_KERNEL_FAIL(kBadArgument, "update_penalties: penalty state needs prompt_bits and vocab >= 1");
  }
  if (seqs == nullptr || (tokens == nullptr && n_rows > 0)) {
    return VS_KERNEL_FAIL(kBadArgument, "update_penalties: seqs or tokens is null");
  }
  update_penalties_kernel<<<static_cast<unsigned>(n_seqs), 128, 0, static_cast<cudaStream_t>(stream)>>>(s, tokens, seqs,
                                                                                                       n_rows);
  VS_CUDA_TRY(cudaGetLastError());
  return KernelStatus::Ok();
}

}  // namespace voltserve::kernels::sampling
