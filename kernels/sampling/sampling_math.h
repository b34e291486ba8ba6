// The arithmetic and the decisions of the device sampler (sampling.cu), as host/device helpers: the order key of a
// logit, the per-element processing (bias, penalties), the weights of the temperature softmax, the per-slice
// statistics and how a row's are combined, the exact pick over a row's sorted candidates, and the radix-descent
// steps of the general path. CUDA-free; tests/kernels/sampling_math_test.cpp checks each against sampling_ref.cpp
// and runs a CPU model of the device algorithm built from these helpers against sample_ref.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#include "common/host_device.h"
#include "sampling/philox.h"
#include "sampling/sampling.h"

namespace voltserve::kernels::sampling {

// Work split: a row is scanned in slices of kSliceSize ids (one block each); each slice keeps its kCandidates
// highest processed logits, from which a row's top kCandidates are exact (a row's top-n lie in its slices' top-n).
inline constexpr int32_t kSliceSize = 4096;
inline constexpr int32_t kCandidates = 64;
inline constexpr int32_t kMaxVocab = 262144;  // 2^18: fixed-point masses below (2^45 each) sum below 2^63
inline constexpr int32_t kMaxSlices = kMaxVocab / kSliceSize;

VS_HD int32_t slice_count(int32_t n_vocab) { return (n_vocab + kSliceSize - 1) / kSliceSize; }

// ---- Roundings. Device code contracts a * b + c into one FMA by default; the reference (host C++, no FMA in the
// x86-64 baseline) rounds the product first, so every product that feeds a sum goes through these.
VS_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
VS_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
VS_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
VS_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
VS_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
VS_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// ---- Order keys. key(a) > key(b) iff a > b for non-NaN floats, with -0 and +0 one key (equal in the reference's
// comparisons). 0 is no float's key: it marks "no element". A composite key orders by key, then by ascending id,
// and is unique per element: the total order (value desc, id asc) of the reference, as one integer.
VS_HD uint32_t float_bits(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}
VS_HD float bits_float(uint32_t u) {
  float v;
  memcpy(&v, &u, sizeof(v));
  return v;
}
VS_HD float pos_inf() { return bits_float(0x7F800000u); }
VS_HD float neg_inf() { return bits_float(0xFF800000u); }
VS_HD double pos_inf_d() {
  const uint64_t u = 0x7FF0000000000000ull;
  double v;
  memcpy(&v, &u, sizeof(v));
  return v;
}

VS_HD uint32_t order_key(float v) {
  const uint32_t u = float_bits(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
VS_HD float key_value(uint32_t k) { return bits_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k); }
inline constexpr uint32_t kNoKey = 0;
VS_HD uint32_t pos_inf_key() { return order_key(pos_inf()); }

VS_HD uint64_t composite_key(uint32_t key, int32_t id) {
  return (static_cast<uint64_t>(key) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(id));
}
VS_HD uint32_t composite_order(uint64_t c) { return static_cast<uint32_t>(c >> 32); }
VS_HD int32_t composite_id(uint64_t c) { return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(c)); }

// PenaltyState::words() for device code (the contract's member function is host-only).
VS_HD int32_t state_words(const PenaltyState& s) { return (s.vocab + 31) / 32; }

// ---- Steps 1-3 per element (process_logits_ref).
struct RowProcess {
  const int32_t* bias_ids = nullptr;  // the row's entries, bias_count of them
  const float* bias_values = nullptr;
  int32_t bias_count = 0;
  const int32_t* counts = nullptr;      // the slot's counts [vocab] (penalized only)
  const uint32_t* prompt_bits = nullptr;  // the slot's prompt bits [words]
  int32_t limit = 0;                     // ids below it carry penalty state: min(n_vocab_real, state vocab)
  bool penalized = false;
  bool rep_on = false, pf_on = false;
  float rep = 1.0f, presence = 0.0f, frequency = 0.0f;
  const int32_t* pending = nullptr;  // generated ids not in counts yet (RowParams::pending_*), penalized only
  int32_t n_pending = 0;
  const uint32_t* mask = nullptr;  // the row's token mask (structured output): ids with a clear bit are -inf
};

VS_HD RowProcess row_process(const RowParams& row, const int32_t* bias_ids, const float* bias_values,
                             const PenaltyState& pen, int32_t n_vocab_real, const uint32_t* masks = nullptr,
                             int32_t mask_words = 0) {
  RowProcess p;
  if (masks != nullptr && row.mask_row >= 0 && mask_words > 0) p.mask = masks + static_cast<int64_t>(row.mask_row) * mask_words;
  if (row.bias_count > 0 && row.bias_offset >= 0 && bias_ids != nullptr && bias_values != nullptr) {
    p.bias_ids = bias_ids + row.bias_offset;
    p.bias_values = bias_values + row.bias_offset;
    p.bias_count = row.bias_count;
  }
  if (row.slot >= 0 && row.slot < pen.n_slots && pen.counts != nullptr && pen.prompt_bits != nullptr) {
    p.rep_on = row.repetition_penalty != 1.0f && row.repetition_penalty > 0.0f;
    p.pf_on = row.presence_penalty != 0.0f || row.frequency_penalty != 0.0f;
    p.penalized = p.rep_on || p.pf_on;
    p.counts = pen.counts + static_cast<int64_t>(row.slot) * pen.vocab;
    p.prompt_bits = pen.prompt_bits + static_cast<int64_t>(row.slot) * state_words(pen);
    p.limit = n_vocab_real < pen.vocab ? n_vocab_real : pen.vocab;
    p.rep = row.repetition_penalty;
    p.presence = row.presence_penalty;
    p.frequency = row.frequency_penalty;
    if (pen.pending != nullptr && row.pending_count > 0 && row.pending_offset >= 0) {
      p.pending = pen.pending + row.pending_offset;
      p.n_pending = row.pending_count;
    }
  }
  return p;
}

// The count of id the penalties see: the slot's, plus the row's pending occurrences of id.
VS_HD int32_t penalty_count(const RowProcess& p, int32_t id, int32_t stored) {
  for (int32_t i = 0; i < p.n_pending; ++i) stored += p.pending[i] == id ? 1 : 0;
  return stored;
}

// Whether id carries penalty state, and what to load for it.
VS_HD bool has_penalty_state(const RowProcess& p, int32_t id) { return p.penalized && id < p.limit; }
VS_HD bool prompt_bit(uint32_t word, int32_t id) { return ((word >> (id & 31)) & 1u) != 0; }

// raw -> processed logit of id. maybe_biased: id may have logit_bias entries (the device tests a bitmap first;
// the entries are added in order, as the reference does). count / in_prompt: the id's penalty state (ignored
// unless has_penalty_state).
VS_HD float process_value(float raw, int32_t id, bool maybe_biased, int32_t count, bool in_prompt,
                          const RowProcess& p) {
  if (p.mask != nullptr && ((p.mask[id >> 5] >> (id & 31)) & 1u) == 0) return neg_inf();
  float v = raw != raw ? neg_inf() : raw;
  if (maybe_biased) {
    for (int32_t b = 0; b < p.bias_count; ++b) {
      if (p.bias_ids[b] == id) v = add_rn(v, p.bias_values[b]);
    }
  }
  if (has_penalty_state(p, id)) {
    if (p.rep_on && (count > 0 || in_prompt)) v = v > 0.0f ? div_rn(v, p.rep) : mul_rn(v, p.rep);
    if (p.pf_on && count > 0) v = sub_rn(v, add_rn(p.presence, mul_rn(p.frequency, static_cast<float>(count))));
  }
  return v;
}

// ---- The temperature softmax (final_distribution_ref): the survivors are the processed logits above -inf, or
// only the +inf ones when there is one (each of weight 1). A survivor's weight is exp(x / T - max / T) in double,
// at most 1 (the maximum's).
struct Softmax {  // trivial (no initialisers): it lives in the finish kernel's shared memory
  double inv_t;
  double m;  // max * inv_t
  bool has_pos_inf;
};

VS_HD Softmax make_softmax(float temperature, uint32_t max_key) {
  Softmax s{};
  s.inv_t = 1.0 / static_cast<double>(temperature);
  s.has_pos_inf = max_key == pos_inf_key();
  s.m = 0.0;
  if (!s.has_pos_inf) s.m = mul_rn(static_cast<double>(key_value(max_key)), s.inv_t);
  return s;
}
VS_HD bool is_survivor(float v, const Softmax& s) { return s.has_pos_inf ? v == pos_inf() : v > neg_inf(); }
// Weight of a survivor v.
VS_HD double weight(float v, const Softmax& s) {
  if (s.has_pos_inf) return 1.0;
  return ::exp(sub_rn(mul_rn(static_cast<double>(v), s.inv_t), s.m));
}
// A weight in fixed point, 2^-45 units: the general path sums these exactly, in any order (deterministic).
inline constexpr double kFixedOne = 35184372088832.0;  // 2^45
VS_HD uint64_t to_fixed(double w) { return static_cast<uint64_t>(w * kFixedOne + 0.5); }

// ---- Per-slice statistics (one block of the scan kernel), combined per row by plan_row.
struct SliceStat {
  int32_t nan_index;  // first NaN id of the raw logits in the slice, -1: none
  uint32_t max_key;   // highest processed key among the slice's elements above -inf; kNoKey: none
  int32_t argmax;     // lowest id with max_key
  int32_t n_surv;     // processed logits above -inf
  int32_t n_posinf;   // processed logits equal to +inf
  int32_t n_cand;     // candidates written: min(kCandidates, n_surv)
  int32_t n_raw_cand;  // raw candidates written: min(kMaxTopLogprobs, slice length)
  float raw_max;      // max raw logit (NaN as -inf)
  double sum_t;       // sum of exp(x / T - max_key / T) over the slice's finite survivors (finite max_key only)
  double raw_sum;     // sum of exp(raw - raw_max) (finite raw_max only)
};

// The device form's workspace: per row and slice a SliceStat, then kCandidates processed and kMaxTopLogprobs raw
// composite keys, each array 256-byte aligned. Host arithmetic only (the memory plan sizes it without a GPU).
struct WorkspaceLayout {
  size_t stats = 0, cand = 0, raw_cand = 0, total = 0;
};
inline WorkspaceLayout workspace_layout(int32_t n_rows, int32_t n_vocab) {
  auto align_up = [](size_t x) { return (x + 255) / 256 * 256; };
  const size_t slices = static_cast<size_t>(n_rows) * static_cast<size_t>(slice_count(n_vocab));
  WorkspaceLayout l;
  l.stats = 0;
  l.cand = align_up(slices * sizeof(SliceStat));
  l.raw_cand = l.cand + align_up(slices * kCandidates * sizeof(uint64_t));
  l.total = l.raw_cand + align_up(slices * kMaxTopLogprobs * sizeof(uint64_t));
  return l;
}

// What the scan kernel computes for a row.
struct RowNeeds {
  bool sample = false;     // the row is sampled at all
  bool greedy = false;
  bool candidates = false;  // top kCandidates processed candidates (any filter asked for)
  bool sums = false;        // the slices' softmax sums (the walk in id order; top-p over all survivors)
  bool raw = false;         // raw max and sum (logprobs)
  bool raw_candidates = false;
};

VS_HD RowNeeds row_needs(const RowParams& row) {
  RowNeeds n;
  n.sample = (row.flags & kSample) != 0;
  if (!n.sample) return n;
  n.greedy = row.temperature <= 0.0f;
  const bool small_k = row.top_k > 0 && row.top_k <= kCandidates;
  n.candidates = !n.greedy && (row.top_k > 0 || row.top_p < 1.0f || row.min_p > 0.0f);
  n.sums = !n.greedy && !small_k;
  n.raw = (row.flags & kLogprobs) != 0;
  n.raw_candidates = n.raw && row.n_top_logprobs > 0;
  return n;
}

VS_HD int32_t top_logprob_count(const RowParams& row, int32_t n_vocab_real) {
  int32_t k = row.n_top_logprobs < 0 ? 0 : row.n_top_logprobs;
  if (k > kMaxTopLogprobs) k = kMaxTopLogprobs;
  return k < n_vocab_real ? k : n_vocab_real;
}

// A slice's softmax mass relative to the row's maximum.
VS_HD double slice_mass(const SliceStat& st, const Softmax& s) {
  if (s.has_pos_inf) return static_cast<double>(st.n_posinf);
  if (st.max_key == kNoKey) return 0.0;
  const double ms = mul_rn(static_cast<double>(key_value(st.max_key)), s.inv_t);
  return mul_rn(st.sum_t, ::exp(sub_rn(ms, s.m)));
}
// A slice element's share of that sum (the scan kernel adds these), given the slice's max key.
VS_HD double slice_term(float v, uint32_t slice_max_key, double inv_t) {
  const double ms = mul_rn(static_cast<double>(key_value(slice_max_key)), inv_t);
  return ::exp(sub_rn(mul_rn(static_cast<double>(v), inv_t), ms));
}
// Raw log-sum-exp pieces (log_softmax_top_ref; fp32 exp: logprobs are reported to 1e-4).
VS_HD double raw_term(float raw, float slice_raw_max) {
  return static_cast<double>(::expf(raw - slice_raw_max));
}
VS_HD bool finite_float(float v) { return v - v == 0.0f; }
// The row's log-sum-exp from its slices: the max, then each slice's term (independent: the device computes them in
// parallel), summed in slice order.
VS_HD float row_raw_max(const SliceStat* st, int32_t n_slices) {
  float mx = neg_inf();
  for (int32_t s = 0; s < n_slices; ++s) mx = st[s].raw_max > mx ? st[s].raw_max : mx;
  return mx;
}
VS_HD double lse_term(const SliceStat& st, float row_max) {
  if (!(st.raw_max > neg_inf()) || !finite_float(row_max)) return 0.0;
  return mul_rn(st.raw_sum, ::exp(static_cast<double>(st.raw_max) - static_cast<double>(row_max)));
}
VS_HD double lse_finish(float row_max, const double* terms, int32_t n_slices) {
  if (!finite_float(row_max)) return -pos_inf_d();
  double sum = 0.0;
  for (int32_t s = 0; s < n_slices; ++s) sum += terms[s];
  return static_cast<double>(row_max) + ::log(sum);
}
VS_HD double row_lse(const SliceStat* st, int32_t n_slices) {
  double terms[kMaxSlices];
  const float mx = row_raw_max(st, n_slices);
  for (int32_t s = 0; s < n_slices; ++s) terms[s] = lse_term(st[s], mx);
  return lse_finish(mx, terms, n_slices);
}
VS_HD float raw_logprob(float raw, double lse) {
  const float v = raw != raw ? neg_inf() : raw;
  if (!(lse - lse == 0.0) || v == neg_inf()) return neg_inf();
  return static_cast<float>(static_cast<double>(v) - lse);
}

// ---- A row's plan from its slices' statistics.
enum RowPath : int32_t {
  kPathPlanning = -1,   // plan_row_head done: the slices' masses and plan_row_tail decide
  kPathDone = 0,        // status and token decided (not sampled, NaN, nothing samplable, greedy)
  kPathCandidates = 1,  // a filter is on: exact_pick over the sorted candidates (or the general path)
  kPathWalkCandidates = 2,  // no filter, every survivor is a candidate: walk_candidates in id order
  kPathWalkSlice = 3,   // no filter: the draw falls in slice walk_slice, walk its ids in order
  kPathGeneral = 4,     // a filter's cut lies past the candidates: radix descents over the whole row
};

struct RowPlan {  // trivial (no initialisers): it lives in the finish kernel's shared memory; see new_plan()
  int32_t status;
  int32_t nan_index;
  int32_t token;
  int32_t path;
  uint32_t max_key;
  int32_t n_surv;  // survivors (the +inf ones when there is one)
  Softmax softmax;
  double total;  // softmax mass of all survivors from the slices' sums (when computed)
  double u;      // the draw
  int32_t walk_slice;
  double walk_target;  // mass into walk_slice at which the draw falls
  // A draft row (RowParams::draft >= 0, sampled): its acceptance and resampling draws, the draft's weight and
  // order key (set between plan_row_head and plan_row_tail; draft_w -1: the draft is not a survivor), and the id the
  // walk skips (the draft after a rejection in id order; -1: none).
  double u_accept;
  double v_resample;
  double draft_w;
  uint32_t draft_key;
  int32_t skip;
};

VS_HD RowPlan new_plan() {
  RowPlan p{};
  p.status = kRowOk;
  p.nan_index = -1;
  p.token = -1;
  p.path = kPathDone;
  p.max_key = kNoKey;
  p.walk_slice = -1;
  p.softmax = Softmax{1.0, 0.0, false};
  p.draft_w = -1.0;
  p.skip = -1;
  return p;
}

VS_HD bool filters_on(const RowParams& row, int32_t n_surv) {
  return (row.top_k > 0 && row.top_k < n_surv) || row.top_p < 1.0f || row.min_p > 0.0f;
}

// Status, maximum, softmax, survivors and draw; kPathPlanning for a sampled row, whose path plan_row_tail decides
// from the slices' masses (slice_mass of each slice with the plan's softmax; the device computes them in parallel).
VS_HD RowPlan plan_row_head(const RowParams& row, const SliceStat* st, int32_t n_slices) {
  RowPlan p = new_plan();
  const RowNeeds needs = row_needs(row);
  if (!needs.sample) return p;
  for (int32_t s = 0; s < n_slices; ++s) {
    if (st[s].nan_index >= 0) {
      p.status = kNanLogits;
      p.nan_index = st[s].nan_index;
      return p;
    }
  }
  int32_t argmax = -1;
  for (int32_t s = 0; s < n_slices; ++s) {
    if (st[s].max_key > p.max_key) {
      p.max_key = st[s].max_key;
      argmax = st[s].argmax;
    }
  }
  if (p.max_key == kNoKey) {
    p.status = kNothingSamplable;
    return p;
  }
  if (needs.greedy) {
    p.token = argmax;
    return p;
  }
  p.softmax = make_softmax(row.temperature, p.max_key);
  for (int32_t s = 0; s < n_slices; ++s) p.n_surv += p.softmax.has_pos_inf ? st[s].n_posinf : st[s].n_surv;
  p.u = uniform_draw(row.seed, row.draw_index, kStreamSample);
  if (row.draft >= 0) {
    p.u_accept = uniform_draw(row.seed, row.draw_index, kStreamAccept);
    p.v_resample = uniform_draw(row.seed, row.draw_index, kStreamResample);
  }
  p.path = kPathPlanning;
  return p;
}

// The survivors of slice s the walk in id order may land on (the plan's skipped draft excluded).
VS_HD int32_t walk_survivors(const SliceStat& st, const RowPlan& p, int32_t s) {
  const int32_t n = p.softmax.has_pos_inf ? st.n_posinf : st.n_surv;
  return n - (p.skip >= 0 && p.draft_w >= 0.0 && p.skip / kSliceSize == s ? 1 : 0);
}

// mass[s]: slice_mass of slice s (read only when the row needs the total: row_needs(row).sums).
VS_HD void plan_row_tail(const RowParams& row, const SliceStat* st, const double* mass, int32_t n_slices,
                         RowPlan& p) {
  const RowNeeds needs = row_needs(row);
  if (needs.sums) {
    for (int32_t s = 0; s < n_slices; ++s) p.total += mass[s];
  }
  if (filters_on(row, p.n_surv)) {
    p.path = kPathCandidates;
    return;
  }
  if (needs.candidates && p.n_surv <= kCandidates) {
    p.path = kPathWalkCandidates;
    return;
  }
  // The slice in which the cumulative mass (ids ascending) passes u * total; past the end (rounding), the last
  // survivor, as the reference's walk ends on its last element.
  p.path = kPathWalkSlice;
  double target = mul_rn(p.u, p.total);
  double skip_w = 0.0;  // the skipped draft's weight, out of its slice's mass
  if (row.draft >= 0) {
    // accept_drafts_ref: accept d iff u_accept < p(d); else walk p without d with v * (1 - p(d)). d as the only
    // survivor has p(d) = 1 (the reference's w / w), whatever the rounding of the slices' sum.
    const double w_d = p.draft_w < 0.0 ? 0.0 : p.draft_w;
    if (p.u_accept < w_d / p.total || (p.draft_w >= 0.0 && p.n_surv == 1)) {
      p.path = kPathDone;
      p.token = row.draft;
      return;
    }
    p.skip = row.draft;
    skip_w = w_d;
    target = mul_rn(p.v_resample, p.total - w_d);
  }
  double before = 0.0;
  for (int32_t s = 0; s < n_slices; ++s) {
    const double m = p.skip >= 0 && p.skip / kSliceSize == s ? mass[s] - skip_w : mass[s];
    if (before + m > target) {
      p.walk_slice = s;
      p.walk_target = target - before;
      return;
    }
    before += m;
  }
  for (int32_t s = 0; s < n_slices; ++s) {
    if (walk_survivors(st[s], p, s) > 0) p.walk_slice = s;
  }
  p.walk_target = pos_inf_d();
}

// RowPlan::draft_w and draft_key from the draft's processed logit.
VS_HD void set_draft(RowPlan& p, float draft_value) {
  p.draft_w = is_survivor(draft_value, p.softmax) ? weight(draft_value, p.softmax) : -1.0;
  p.draft_key = order_key(draft_value);
}

// draft_value: a draft row's processed logit of row.draft.
VS_HD RowPlan plan_row(const RowParams& row, const SliceStat* st, int32_t n_slices, float draft_value = neg_inf()) {
  RowPlan p = plan_row_head(row, st, n_slices);
  if (p.path != kPathPlanning) return p;
  if (row.draft >= 0) set_draft(p, draft_value);
  double mass[kMaxSlices];
  for (int32_t s = 0; s < n_slices; ++s) mass[s] = slice_mass(st[s], p.softmax);
  plan_row_tail(row, st, mass, n_slices, p);
  return p;
}

// ---- The pick over the candidates: ids[0, c) sorted by (value desc, id asc) with their weights w, the row's top
// min(kCandidates, n_surv) survivors. Follows final_distribution_ref and the draw step by step, with the same
// roundings, wherever the candidates hold every element that the filters keep; returns kNeedGeneral where a cut
// lies past them (the general path decides those rows).
inline constexpr int32_t kNeedGeneral = -2;

// The length of the final list: the first `keep` candidates, or kNeedGeneral.
VS_HD int32_t exact_keep(const double* w, int32_t c, int32_t n_surv, const RowParams& row, double total_all) {
  const bool top_k_on = row.top_k > 0 && row.top_k < n_surv;
  const bool top_p_on = row.top_p < 1.0f;
  const bool min_p_on = row.min_p > 0.0f;
  const int32_t k = top_k_on ? row.top_k : n_surv;  // length of the list after top-k
  const bool whole = k <= c;                         // that list is in hand
  int32_t keep = whole ? k : c;
  bool open = !whole;  // the list continues past keep
  if (top_p_on) {
    double total = 0.0;
    if (whole) {
      for (int32_t j = 0; j < k; ++j) total += w[j];
    } else if (!top_k_on) {
      total = total_all;
    } else {
      return kNeedGeneral;  // the mass of a top-k list longer than the candidates
    }
    const double limit = static_cast<double>(row.top_p) * total;
    const int32_t size = keep;
    double cum = 0.0;
    keep = 0;
    while (keep < size && (keep == 0 || cum < limit)) cum += w[keep++];
    if (open && cum < limit) return kNeedGeneral;  // the prefix goes on past the candidates
    open = false;
  }
  if (min_p_on) {
    const double threshold = static_cast<double>(row.min_p) * w[0];
    int32_t m = 1;
    while (m < keep && w[m] >= threshold) ++m;
    if (open && m == keep) return kNeedGeneral;  // every candidate passes: the cut lies past them
    keep = m;
    open = false;
  }
  if (open) return kNeedGeneral;
  return keep;
}

// The draw over a final list in hand, ids[0, c) in the order the reference walks it with weights w: a filtered list
// sorted by (value desc, id asc), or, with no filter, every survivor in ascending id order.
VS_HD int32_t walk_candidates(const int32_t* ids, const double* w, int32_t c, double u) {
  double total = 0.0;
  for (int32_t j = 0; j < c; ++j) total += w[j];
  double cum = 0.0;
  for (int32_t j = 0; j < c; ++j) {
    cum += w[j] / total;
    if (u < cum) return ids[j];
  }
  return ids[c - 1];
}

VS_HD int32_t exact_pick(const int32_t* ids, const double* w, int32_t c, int32_t n_surv, const RowParams& row,
                         double total_all, double u) {
  const int32_t keep = exact_keep(w, c, n_surv, row, total_all);
  return keep == kNeedGeneral ? kNeedGeneral : walk_candidates(ids, w, keep, u);
}

// A draft row's acceptance over such a list (accept_drafts_ref with its roundings): p_j = w_j / total; emit the draft
// d when u_accept < p(d), else walk the list without d with v_resample * (the rest's mass, summed in order).
VS_HD int32_t accept_candidates(const int32_t* ids, const double* w, int32_t c, int32_t draft, double u_accept,
                                double v_resample) {
  double total = 0.0;
  for (int32_t j = 0; j < c; ++j) total += w[j];
  double p_d = 0.0, rest = 0.0;
  for (int32_t j = 0; j < c; ++j) {
    if (ids[j] == draft) {
      p_d += w[j] / total;
    } else {
      rest += w[j] / total;
    }
  }
  if (u_accept < p_d) return draft;
  const double target = v_resample * rest;
  double cum = 0.0;
  int32_t last = -1;
  for (int32_t j = 0; j < c; ++j) {
    if (ids[j] == draft) continue;
    cum += w[j] / total;
    last = ids[j];
    if (target < cum) return ids[j];
  }
  return last;
}

// A draft row over the candidates: exact_keep's list, then accept_candidates; kNeedGeneral where the cut lies past
// the candidates.
VS_HD int32_t exact_accept(const int32_t* ids, const double* w, int32_t c, int32_t n_surv, const RowParams& row,
                           double total_all, double u_accept, double v_resample) {
  const int32_t keep = exact_keep(w, c, n_surv, row, total_all);
  return keep == kNeedGeneral ? kNeedGeneral : accept_candidates(ids, w, keep, row.draft, u_accept, v_resample);
}

// ---- The general path: positions in the order (value desc, id asc) found by radix descent over the 32-bit order
// keys of the survivors, 8 bits a level from the top, with per-bin counts and fixed-point masses. At each level the
// bins are scanned from the highest down, adding up what lies above, to the first non-empty bin where the running
// count / mass meets the target.
enum class SelectMode : int32_t {
  kCount,        // the target-th element (1-based): count above + bin >= target
  kMassAtLeast,  // the first element where the cumulative mass >= target (top-p)
  kMassAbove,    // the first element where the cumulative mass > target (the draw)
};

VS_HD bool select_reached(SelectMode mode, uint64_t target, uint64_t count, uint64_t mass) {
  switch (mode) {
    case SelectMode::kCount: return count >= target;
    case SelectMode::kMassAtLeast: return mass >= target;
    case SelectMode::kMassAbove: return mass > target;
  }
  return false;
}

// Scans bins hi, hi-1, ..., lo; on the first non-empty bin that reaches the target returns true with *bin set;
// otherwise adds each bin to *count_above / *mass_above. mass may be null (counts only).
VS_HD bool descend_bins(const uint32_t* count, const uint64_t* mass, int32_t hi, int32_t lo, SelectMode mode,
                        uint64_t target, uint64_t* count_above, uint64_t* mass_above, int32_t* bin) {
  for (int32_t d = hi; d >= lo; --d) {
    const uint64_t c = count[d];
    const uint64_t m = mass != nullptr ? mass[d] : 0;
    if (c > 0 && select_reached(mode, target, *count_above + c, *mass_above + m)) {
      *bin = d;
      return true;
    }
    *count_above += c;
    *mass_above += m;
  }
  return false;
}

// After the last level: the position (1-based) of the target among the ties at key tau, all of weight w_fixed,
// given the count and mass above them. At least 1, at most n_ties.
VS_HD uint64_t tie_position(SelectMode mode, uint64_t target, uint64_t count_above, uint64_t mass_above,
                            uint64_t w_fixed, uint64_t n_ties) {
  uint64_t t = 1;
  if (mode == SelectMode::kCount) {
    t = target > count_above ? target - count_above : 1;
  } else if (w_fixed > 0) {
    const uint64_t need = target > mass_above ? target - mass_above : 0;
    t = mode == SelectMode::kMassAtLeast ? (need + w_fixed - 1) / w_fixed : need / w_fixed + 1;
  } else {
    t = n_ties;
  }
  if (t < 1) t = 1;
  return t < n_ties ? t : n_ties;
}

// The result of one descent: the key tau of the selected position, the survivors above it (count, mass), and
// the ties at tau (count, weight each); position = count_above + tie (1-based).
struct Descent {
  bool found = false;
  uint32_t tau = 0;
  uint64_t count_above = 0, mass_above = 0;
  uint64_t n_ties = 0, w_tie = 0;
  uint64_t tie = 0;
  VS_HD uint64_t position() const { return count_above + tie; }
  VS_HD uint64_t mass_through() const { return mass_above + tie * w_tie; }  // mass of positions 1..position()
};

// The general path's targets: the fixed-point limit of top-p over a list of mass `total`, and the draw's.
VS_HD uint64_t top_p_target(float top_p, uint64_t total) {
  const double x = ::ceil(static_cast<double>(top_p) * static_cast<double>(total));
  return x <= 0.0 ? 0 : static_cast<uint64_t>(x);
}
VS_HD uint64_t draw_target(double u, uint64_t total) {
  return static_cast<uint64_t>(::floor(u * static_cast<double>(total)));
}

// The general path's driver: which question to ask of the row next, from the answers so far. The device runs it
// in every thread of the row's block (the answers are block-wide), the CPU model with loops; both answer
//   kAskTotals:  over all survivors, the total fixed-point mass, and how many survivors (and their mass) have a
//                weight >= min_p (the min-p threshold: min_p times the maximum's weight, 1);
//   kAskDescent: a Descent for (mode, target);
//   kAskTie:     the id of the tie_index-th (0-based, ids ascending) survivor with key tau;
//   kAskRank:    how many survivors (and their mass) come before the draft (key above draft_key, or equal with a
//                lower id).
// The order of questions follows final_distribution_ref: the top-k list (its mass), the top-p prefix, the min-p cut,
// then the draw over what is left (position F at most: the reference's walk ends on its last element). A draft row
// (accept_drafts_ref) asks for the draft's rank instead of drawing: with the draft at position P <= F, mass M before
// it and weight w, it is accepted when u_accept < w / total; else the draw over the list without it, target
// t = floor(v_resample * (total - w)), is the draw over the whole list at t (t < M) or t + w (t >= M), which lands
// before or after the draft, never on it.
enum GeneralAsk : int32_t { kAskTotals = 0, kAskDescent = 1, kAskTie = 2, kAskDone = 3, kAskRank = 4 };

struct GeneralTotals {
  uint64_t total = 0;
  uint64_t n_min_p = 0, mass_min_p = 0;
};

struct GeneralRank {
  uint64_t count = 0, mass = 0;  // survivors before the draft in the order, and their fixed-point mass
};

struct General {
  // Set up by the caller.
  int32_t n_surv = 0;
  double u = 0.0;
  // A draft row: the draft, whether it survives, its order key and fixed-point weight, the rule's two draws.
  int32_t draft = -1;
  bool draft_surv = false;
  uint32_t draft_key = 0;
  uint64_t draft_wfx = 0;
  double u_accept = 0.0, v_resample = 0.0;
  // Answers, filled in by the caller after each question.
  GeneralTotals totals;
  Descent answer;
  GeneralRank rank;
  int32_t tie_id = -1;
  // The next question.
  int32_t ask = kAskTotals;
  SelectMode mode = SelectMode::kCount;
  uint64_t target = 0;
  uint32_t tau = 0;
  uint64_t tie_index = 0;
  // Progress.
  int32_t stage = 0;
  uint64_t k = 0, total_k = 0, l = 0, total_l = 0, f = 0, total_f = 0;
  uint64_t draft_pos = 0;  // the draft's position in the final list (1-based), 0: not in it
};

// A General for a sampled row's plan (the plan's draft fields for a draft row).
VS_HD General new_general(const RowParams& row, const RowPlan& plan) {
  General g;
  g.n_surv = plan.n_surv;
  g.u = plan.u;
  if (row.draft >= 0) {
    g.draft = row.draft;
    g.draft_surv = plan.draft_w >= 0.0;
    g.draft_key = plan.draft_key;
    g.draft_wfx = g.draft_surv ? to_fixed(plan.draft_w) : 0;
    g.u_accept = plan.u_accept;
    g.v_resample = plan.v_resample;
  }
  return g;
}

// Advances g to its next question (g.ask); kAskDone leaves the token in g.tie_id.
VS_HD void general_next(General& g, const RowParams& row) {
  const bool top_k_on = row.top_k > 0 && row.top_k < g.n_surv;
  const bool top_p_on = row.top_p < 1.0f;
  const bool min_p_on = row.min_p > 0.0f;
  for (;;) {
    switch (g.stage) {
      case 0:  // start: the totals
        g.ask = kAskTotals;
        g.stage = 1;
        return;
      case 1:  // totals in: the top-k list
        g.k = top_k_on ? static_cast<uint64_t>(row.top_k) : static_cast<uint64_t>(g.n_surv);
        if (top_k_on) {
          g.ask = kAskDescent;
          g.mode = SelectMode::kCount;
          g.target = g.k;
          g.stage = 2;
          return;
        }
        g.total_k = g.totals.total;
        g.stage = 3;
        continue;
      case 2:  // the k-th survivor in: the list's mass
        g.total_k = g.answer.mass_through();
        g.stage = 3;
        continue;
      case 3:  // top-p
        if (top_p_on) {
          g.ask = kAskDescent;
          g.mode = SelectMode::kMassAtLeast;
          g.target = top_p_target(row.top_p, g.total_k);
          g.stage = 4;
          return;
        }
        g.l = g.k;
        g.total_l = g.total_k;
        g.stage = 5;
        continue;
      case 4:  // the top-p prefix in
        if (g.answer.found && g.answer.position() < g.k) {
          g.l = g.answer.position();
          g.total_l = g.answer.mass_through();
        } else {
          g.l = g.k;
          g.total_l = g.total_k;
        }
        g.stage = 5;
        continue;
      case 5:  // min-p, then the draw
        g.f = g.l;
        g.total_f = g.total_l;
        if (min_p_on && g.totals.n_min_p < g.l) {
          g.f = g.totals.n_min_p > 0 ? g.totals.n_min_p : 1;
          g.total_f = g.totals.n_min_p > 0 ? g.totals.mass_min_p : to_fixed(1.0);
        }
        if (g.draft >= 0) {
          g.ask = kAskRank;
          g.stage = 9;
          return;
        }
        g.ask = kAskDescent;
        g.mode = SelectMode::kMassAbove;
        g.target = draw_target(g.u, g.total_f);
        g.stage = 6;
        return;
      case 9: {  // a draft row: the draft's rank in; accept it, or draw around it
        const bool in_list = g.draft_surv && g.rank.count + 1 <= g.f;
        g.draft_pos = in_list ? g.rank.count + 1 : 0;
        const uint64_t w = in_list ? g.draft_wfx : 0;
        if (in_list && (g.f == 1 || g.u_accept < static_cast<double>(w) / static_cast<double>(g.total_f))) {
          g.tie_id = g.draft;
          g.ask = kAskDone;
          return;
        }
        uint64_t t = draw_target(g.v_resample, g.total_f - w);
        if (in_list && t >= g.rank.mass) t += w;
        g.ask = kAskDescent;
        g.mode = SelectMode::kMassAbove;
        g.target = t;
        g.stage = 6;
        return;
      }
      case 6:  // the drawn position in
        if (g.answer.found && g.answer.position() <= g.f) {
          g.ask = kAskTie;
          g.tau = g.answer.tau;
          g.tie_index = g.answer.tie - 1;
          g.stage = 8;
          return;
        }
        g.ask = kAskDescent;  // past the end (rounding): the F-th survivor (the one before it, if that is the draft)
        g.mode = SelectMode::kCount;
        g.target = g.draft_pos == g.f && g.f > 1 ? g.f - 1 : g.f;
        g.stage = 7;
        return;
      case 7:
        g.ask = kAskTie;
        g.tau = g.answer.tau;
        g.tie_index = g.answer.tie - 1;
        g.stage = 8;
        return;
      default:  // the tie's id in
        g.ask = kAskDone;
        return;
    }
  }
}

}  // namespace voltserve::kernels::sampling
