// The device sampler's arithmetic and decisions (kernels/sampling/sampling_math.h) on the CPU: order keys, the
// per-element processing against process_logits_ref (bit for bit), the candidate pick and the radix descents
// against sorted recomputations, and a CPU model of the whole device algorithm (slices, row plan, candidates, walks,
// the general path's questions answered by loops) against sample_ref on flat, peaked, tied and +inf rows, small
// vocabularies and the 248320-wide one; its draft rows (speculative acceptance) against accept_drafts_ref.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "kernels/sampling/accept.h"
#include "kernels/sampling/sampling.h"
#include "kernels/sampling/sampling_math.h"
#include "sampling_draft_ref.h"
#include "sampling_random.h"

using namespace voltserve::kernels;
using namespace voltserve::kernels::sampling;
using voltserve::test::LogitShape;
using voltserve::test::SampleRng;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- A CPU model of sampling.cu, built from the shared helpers. Where the device works in parallel (block
// reductions, selects, scans) the model loops; it sums in other orders than the device does, which only moves
// results at rounding boundaries.

struct Row {
  std::vector<float> logits;  // [stride]
  int32_t n_real = 0;
  RowParams params;
};

struct Step {
  std::vector<Row> rows;
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  std::vector<int32_t> counts;
  std::vector<uint32_t> bits;
  std::vector<int32_t> pending;  // RowParams::pending_* index it (pen.pending points at it)
  PenaltyState pen;
};

struct RowOut {
  int32_t token = -1, status = kRowOk, nan_index = -1;
  float logprob = 0.0f;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  int32_t path = kPathDone;
};

// A row's processed logits, computed once (the device recomputes them in every pass; they are a pure function of
// the inputs). The bias loop runs only for ids with an entry, as behind the device's bitmap.
struct ModelRow {
  const Row& row;
  RowProcess rp;
  int32_t n;
  std::vector<float> pv;
  ModelRow(const Row& r, const Step& st)
      : row(r), rp(row_process(r.params, st.bias_ids.data(), st.bias_values.data(), st.pen, r.n_real)), n(r.n_real) {
    std::vector<char> biased(static_cast<size_t>(n), 0);
    for (int32_t b = 0; b < rp.bias_count; ++b) {
      if (rp.bias_ids[b] >= 0 && rp.bias_ids[b] < n) biased[static_cast<size_t>(rp.bias_ids[b])] = 1;
    }
    pv.resize(static_cast<size_t>(n));
    for (int32_t id = 0; id < n; ++id) {
      int32_t count = 0;
      bool in_prompt = false;
      if (has_penalty_state(rp, id)) {
        count = penalty_count(rp, id, rp.counts[id]);
        in_prompt = prompt_bit(rp.prompt_bits[id >> 5], id);
      }
      pv[static_cast<size_t>(id)] =
          process_value(r.logits[static_cast<size_t>(id)], id, biased[static_cast<size_t>(id)] != 0, count, in_prompt, rp);
    }
  }
  float value(int32_t id) const { return pv[static_cast<size_t>(id)]; }
};

// Top t composites of the given ones (all distinct), descending.
std::vector<uint64_t> top_composites(std::vector<uint64_t> c, size_t t) {
  std::sort(c.begin(), c.end(), [](uint64_t a, uint64_t b) { return a > b; });
  if (c.size() > t) c.resize(t);
  return c;
}

struct Slices {
  std::vector<SliceStat> stats;
  std::vector<std::vector<uint64_t>> cand, raw_cand;
};

Slices scan_model(const ModelRow& m) {
  const RowParams& p = m.row.params;
  const RowNeeds needs = row_needs(p);
  const int32_t n_slices = slice_count(m.n);
  Slices out;
  out.stats.resize(static_cast<size_t>(n_slices));
  out.cand.resize(static_cast<size_t>(n_slices));
  out.raw_cand.resize(static_cast<size_t>(n_slices));
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  for (int32_t s = 0; s < n_slices; ++s) {
    SliceStat& st = out.stats[static_cast<size_t>(s)];
    st = SliceStat{-1, kNoKey, -1, 0, 0, 0, 0, neg_inf(), 0.0, 0.0};
    const int32_t lo = s * kSliceSize, hi = std::min(m.n, lo + kSliceSize);
    std::vector<float> pv(static_cast<size_t>(hi - lo));
    for (int32_t id = lo; id < hi; ++id) {
      const float raw = m.row.logits[static_cast<size_t>(id)];
      if (raw != raw && st.nan_index < 0) st.nan_index = id;
      const float v = m.value(id);
      pv[static_cast<size_t>(id - lo)] = v;
      if (v > neg_inf()) {
        ++st.n_surv;
        st.n_posinf += v == kInf ? 1 : 0;
        if (order_key(v) > st.max_key) {
          st.max_key = order_key(v);
          st.argmax = id;
        }
        out.cand[static_cast<size_t>(s)].push_back(composite_key(order_key(v), id));
      }
      const float r = raw != raw ? neg_inf() : raw;
      st.raw_max = std::max(st.raw_max, r);
      out.raw_cand[static_cast<size_t>(s)].push_back(composite_key(order_key(r), id));
    }
    if (needs.sums && st.max_key != kNoKey && st.max_key != pos_inf_key()) {
      for (float v : pv)
        if (v > neg_inf()) st.sum_t += slice_term(v, st.max_key, inv_t);
    }
    if (std::isfinite(st.raw_max)) {
      for (int32_t id = lo; id < hi; ++id) {
        const float raw = m.row.logits[static_cast<size_t>(id)];
        st.raw_sum += raw_term(raw != raw ? neg_inf() : raw, st.raw_max);
      }
    }
    out.cand[static_cast<size_t>(s)] = top_composites(out.cand[static_cast<size_t>(s)], kCandidates);
    out.raw_cand[static_cast<size_t>(s)] = top_composites(out.raw_cand[static_cast<size_t>(s)], kMaxTopLogprobs);
    st.n_cand = needs.candidates ? static_cast<int32_t>(out.cand[static_cast<size_t>(s)].size()) : 0;
    st.n_raw_cand = needs.raw_candidates ? static_cast<int32_t>(out.raw_cand[static_cast<size_t>(s)].size()) : 0;
  }
  return out;
}

// The general path's questions, answered by loops over the row (keys and fixed-point weights computed once).
struct GeneralModel {
  const ModelRow& m;
  const Softmax& sm;
  float min_p;
  int32_t passes = 0;
  std::vector<char> surv;
  std::vector<uint32_t> keys;
  std::vector<uint64_t> wfxs;
  std::vector<double> ws;

  GeneralModel(const ModelRow& mr, const Softmax& s, float mp) : m(mr), sm(s), min_p(mp) {
    surv.resize(static_cast<size_t>(m.n));
    keys.resize(surv.size());
    wfxs.resize(surv.size());
    ws.resize(surv.size());
    for (int32_t id = 0; id < m.n; ++id) {
      const float v = m.value(id);
      surv[static_cast<size_t>(id)] = is_survivor(v, sm) ? 1 : 0;
      if (!surv[static_cast<size_t>(id)]) continue;
      keys[static_cast<size_t>(id)] = order_key(v);
      ws[static_cast<size_t>(id)] = weight(v, sm);
      wfxs[static_cast<size_t>(id)] = to_fixed(ws[static_cast<size_t>(id)]);
    }
  }
  bool survivor_key(int32_t id, uint32_t* key, uint64_t* wfx) const {
    if (!surv[static_cast<size_t>(id)]) return false;
    *key = keys[static_cast<size_t>(id)];
    *wfx = wfxs[static_cast<size_t>(id)];
    return true;
  }
  GeneralTotals totals() {
    ++passes;
    GeneralTotals t;
    for (int32_t id = 0; id < m.n; ++id) {
      if (!surv[static_cast<size_t>(id)]) continue;
      const double w = ws[static_cast<size_t>(id)];
      t.total += to_fixed(w);
      if (w >= static_cast<double>(min_p)) {
        ++t.n_min_p;
        t.mass_min_p += to_fixed(w);
      }
    }
    return t;
  }
  Descent descent(SelectMode mode, uint64_t target) {
    Descent r;
    uint32_t prefix = 0;
    uint64_t ca = 0, ma = 0;
    uint32_t hc[256];
    uint64_t hm[256];
    int32_t d = 0;
    for (int level = 0; level < 4; ++level) {
      ++passes;
      const int shift = 24 - 8 * level;
      std::fill(hc, hc + 256, 0u);
      std::fill(hm, hm + 256, uint64_t{0});
      for (int32_t id = 0; id < m.n; ++id) {
        uint32_t key;
        uint64_t wfx;
        if (!survivor_key(id, &key, &wfx)) continue;
        if (level > 0 && (key >> (shift + 8)) != (prefix >> (shift + 8))) continue;
        ++hc[(key >> shift) & 255];
        hm[(key >> shift) & 255] += wfx;
      }
      if (!descend_bins(hc, hm, 255, 0, mode, target, &ca, &ma, &d)) return r;
      prefix |= static_cast<uint32_t>(d) << shift;
    }
    r.found = true;
    r.tau = prefix;
    r.count_above = ca;
    r.mass_above = ma;
    r.n_ties = hc[d];
    r.w_tie = hm[d] / hc[d];
    r.tie = tie_position(mode, target, ca, ma, r.w_tie, r.n_ties);
    return r;
  }
  GeneralRank rank(uint32_t key, int32_t draft) {
    ++passes;
    GeneralRank r;
    for (int32_t id = 0; id < m.n; ++id) {
      const size_t i = static_cast<size_t>(id);
      if (surv[i] && (keys[i] > key || (keys[i] == key && id < draft))) {
        ++r.count;
        r.mass += wfxs[i];
      }
    }
    return r;
  }
  int32_t tie(uint32_t tau, uint64_t index) {
    ++passes;
    uint64_t seen = 0;
    for (int32_t id = 0; id < m.n; ++id) {
      uint32_t key;
      uint64_t wfx;
      if (survivor_key(id, &key, &wfx) && key == tau && seen++ == index) return id;
    }
    return -1;
  }
};

int32_t general_model(const ModelRow& m, const RowPlan& plan, int32_t* passes) {
  GeneralModel ex(m, plan.softmax, m.row.params.min_p);
  General g = new_general(m.row.params, plan);
  for (;;) {
    general_next(g, m.row.params);
    if (g.ask == kAskDone) break;
    if (g.ask == kAskTotals) g.totals = ex.totals();
    if (g.ask == kAskDescent) g.answer = ex.descent(g.mode, g.target);
    if (g.ask == kAskTie) g.tie_id = ex.tie(g.tau, g.tie_index);
    if (g.ask == kAskRank) g.rank = ex.rank(g.draft_key, g.draft);
  }
  *passes = ex.passes;
  return g.tie_id;
}

RowOut model_row(const Row& row, const Step& step) {
  RowOut o;
  const ModelRow m(row, step);
  const RowParams& p = row.params;
  const Slices sl = scan_model(m);
  const int32_t n_slices = static_cast<int32_t>(sl.stats.size());
  const bool draft_row = p.draft >= 0;
  const RowPlan plan =
      plan_row(p, sl.stats.data(), n_slices, draft_row && p.draft < m.n ? m.value(p.draft) : neg_inf());
  o.status = plan.status;
  o.nan_index = plan.nan_index;
  o.token = plan.token;
  o.path = plan.path;
  if (plan.path == kPathCandidates || plan.path == kPathWalkCandidates) {
    std::vector<uint64_t> all;
    for (int32_t s = 0; s < n_slices; ++s)
      all.insert(all.end(), sl.cand[static_cast<size_t>(s)].begin(),
                 sl.cand[static_cast<size_t>(s)].begin() + sl.stats[static_cast<size_t>(s)].n_cand);
    all = top_composites(all, kCandidates);
    if (plan.softmax.has_pos_inf) {
      all.erase(std::remove_if(all.begin(), all.end(), [](uint64_t c) { return composite_order(c) != pos_inf_key(); }),
                all.end());
    }
    if (plan.path == kPathWalkCandidates) {
      std::sort(all.begin(), all.end(), [](uint64_t a, uint64_t b) { return composite_id(a) < composite_id(b); });
    }
    std::vector<int32_t> ids;
    std::vector<double> w;
    for (uint64_t c : all) {
      ids.push_back(composite_id(c));
      w.push_back(weight(key_value(composite_order(c)), plan.softmax));
    }
    const int32_t c = static_cast<int32_t>(ids.size());
    if (plan.path == kPathWalkCandidates) {
      REQUIRE(c == plan.n_surv);
      o.token = draft_row ? accept_candidates(ids.data(), w.data(), c, p.draft, plan.u_accept, plan.v_resample)
                          : walk_candidates(ids.data(), w.data(), c, plan.u);
    } else {
      REQUIRE(c == std::min(kCandidates, plan.n_surv));
      o.token = draft_row ? exact_accept(ids.data(), w.data(), c, plan.n_surv, p, plan.total, plan.u_accept,
                                         plan.v_resample)
                          : exact_pick(ids.data(), w.data(), c, plan.n_surv, p, plan.total, plan.u);
    }
    if (o.token == kNeedGeneral) {
      o.path = kPathGeneral;
      int32_t passes = 0;
      o.token = general_model(m, plan, &passes);
    }
  } else if (plan.path == kPathWalkSlice) {
    REQUIRE(plan.walk_slice >= 0);
    const int32_t lo = plan.walk_slice * kSliceSize, hi = std::min(m.n, lo + kSliceSize);
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t id = lo; id < hi && o.token < 0; ++id) {
      const float v = m.value(id);
      if (!is_survivor(v, plan.softmax) || id == plan.skip) continue;
      last = id;
      cum += weight(v, plan.softmax);
      if (cum > plan.walk_target) o.token = id;
    }
    if (o.token < 0) o.token = last;
  }
  if (o.status == kRowOk && o.token >= 0 && (p.flags & kLogprobs) != 0) {
    const double lse = row_lse(sl.stats.data(), n_slices);
    o.logprob = raw_logprob(row.logits[static_cast<size_t>(o.token)], lse);
    std::vector<uint64_t> all;
    for (int32_t s = 0; s < n_slices; ++s)
      all.insert(all.end(), sl.raw_cand[static_cast<size_t>(s)].begin(),
                 sl.raw_cand[static_cast<size_t>(s)].begin() + sl.stats[static_cast<size_t>(s)].n_raw_cand);
    all = top_composites(all, static_cast<size_t>(top_logprob_count(p, m.n)));
    for (uint64_t c : all) {
      o.top_ids.push_back(composite_id(c));
      o.top_logprobs.push_back(raw_logprob(key_value(composite_order(c)), lse));
    }
  }
  return o;
}

RowOut reference_row(const Row& row, const Step& step) {
  RowOut o;
  RowParams p = row.params;
  std::vector<int32_t> top(kMaxTopLogprobs, -1);
  std::vector<float> toplp(kMaxTopLogprobs, 0.0f);
  RefArgs a;
  a.logits = row.logits.data();
  a.logits_stride = static_cast<int64_t>(row.logits.size());
  a.n_rows = 1;
  a.n_vocab_real = row.n_real;
  a.rows = &p;
  a.bias_ids = step.bias_ids.data();
  a.bias_values = step.bias_values.data();
  a.penalties = step.pen;
  a.out = Outputs{&o.token, &o.logprob, top.data(), toplp.data(), &o.status, &o.nan_index};
  sample_ref(a);
  if (o.status == kRowOk && (p.flags & kLogprobs) != 0) {
    const int32_t k = top_logprob_count(p, row.n_real);
    o.top_ids.assign(top.begin(), top.begin() + k);
    o.top_logprobs.assign(toplp.begin(), toplp.begin() + k);
  }
  return o;
}

// accept_drafts_ref's verdict on one draft row (sampling_draft_ref.h).
RowOut reference_draft_row(const Row& row, const Step& step) {
  const RowParams& p = row.params;
  const voltserve::test::DraftVerdict v =
      voltserve::test::judge_draft_ref(row.logits.data(), static_cast<int64_t>(row.logits.size()), row.n_real, p,
                                       step.bias_ids.data(), step.bias_values.data(), step.pen, step.pending.data());
  RowOut o;
  o.token = v.token;
  o.status = v.status;
  o.nan_index = v.nan_index;
  if (o.status == kRowOk && (p.flags & kLogprobs) != 0) {
    o.logprob = v.logprob;
    const auto k = static_cast<size_t>(top_logprob_count(p, row.n_real));
    o.top_ids.assign(v.top_ids.begin(), v.top_ids.begin() + static_cast<std::ptrdiff_t>(k));
    o.top_logprobs.assign(v.top_logprobs.begin(), v.top_logprobs.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return o;
}

// A draft for a row: its processed argmax, one of its five most likely ids, any id, or an id past the real ones.
int32_t pick_draft(const Row& row, const Step& st, int kind, SampleRng& rng) {
  const ModelRow m(row, st);
  std::vector<int32_t> order(static_cast<size_t>(m.n));
  for (int32_t i = 0; i < m.n; ++i) order[static_cast<size_t>(i)] = i;
  const size_t top = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](int32_t a, int32_t b) { return m.value(a) > m.value(b) || (m.value(a) == m.value(b) && a < b); });
  switch (kind) {
    case 0: return order[0];
    case 1: return order[rng.next() % top];
    case 2: return static_cast<int32_t>(rng.next() % static_cast<uint64_t>(m.n));
    default: return m.n + static_cast<int32_t>(rng.next() % 3);
  }
}

// A step of rows over one vocabulary: random logits of each shape, parameters from a list of settings, some
// rows with logit_bias or penalty state.
struct Setting {
  const char* name;
  float temperature, top_p, min_p;
  int32_t top_k;
};
const Setting kSettings[] = {
    {"greedy", 0.0f, 1.0f, 0.0f, 0},       {"T=1", 1.0f, 1.0f, 0.0f, 0},
    {"T=0.7", 0.7f, 1.0f, 0.0f, 0},        {"top_k=1", 1.0f, 1.0f, 0.0f, 1},
    {"top_k=20", 0.8f, 1.0f, 0.0f, 20},    {"top_k=1000", 1.0f, 1.0f, 0.0f, 1000},
    {"top_p=0.9", 1.0f, 0.9f, 0.0f, 0},    {"top_p=0.5", 0.6f, 0.5f, 0.0f, 0},
    {"k20+p0.95", 1.0f, 0.95f, 0.0f, 20},  {"k1000+p0.9", 1.0f, 0.9f, 0.0f, 1000},
    {"min_p=0.1", 1.0f, 1.0f, 0.1f, 0},    {"min_p=0.05+p0.9", 1.3f, 0.9f, 0.05f, 0},
    {"k64+min_p", 1.0f, 1.0f, 0.02f, 64},  {"k65+p0.8", 0.9f, 0.8f, 0.0f, 65},
    {"top_p tiny", 1.0f, 1e-6f, 0.0f, 0},  {"T=2+p0.99", 2.0f, 0.99f, 0.0f, 0},
};

struct Compare {
  int rows = 0, token_diff = 0, other_diff = 0, general = 0;
  int accepted = 0, rejected = 0;  // draft rows
  void row(const std::string& name, const RowOut& got, const RowOut& want) {
    ++rows;
    general += got.path == kPathGeneral ? 1 : 0;
    bool ok = got.status == want.status && got.nan_index == want.nan_index && got.top_ids == want.top_ids;
    for (size_t i = 0; ok && i < got.top_logprobs.size(); ++i) {
      ok = std::fabs(got.top_logprobs[i] - want.top_logprobs[i]) <= 1e-5f ||
           (got.top_logprobs[i] == want.top_logprobs[i]);
    }
    if (want.status == kRowOk && !(std::fabs(got.logprob - want.logprob) <= 1e-5f || got.logprob == want.logprob))
      ok = false;
    if (!ok) {
      ++other_diff;
      std::printf("model %s: status %d/%d nan %d/%d logprob %g/%g\n", name.c_str(), got.status, want.status,
                  got.nan_index, want.nan_index, got.logprob, want.logprob);
    }
    if (got.token != want.token) {
      ++token_diff;
      std::printf("model %s: token %d, reference %d (path %d)\n", name.c_str(), got.token, want.token, got.path);
    }
  }
};

void fill_penalties(Step& st, int32_t vocab, int32_t n_slots, SampleRng& rng) {
  st.counts.assign(static_cast<size_t>(vocab) * static_cast<size_t>(n_slots), 0);
  st.pen.vocab = vocab;
  st.pen.n_slots = n_slots;
  st.bits.assign(static_cast<size_t>(st.pen.words()) * static_cast<size_t>(n_slots), 0u);
  for (int32_t s = 0; s < n_slots; ++s) {
    for (int i = 0; i < 400; ++i) {
      const int32_t id = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
      if (rng.next() % 2) {
        st.counts[static_cast<size_t>(s * vocab + id)] += 1 + static_cast<int32_t>(rng.next() % 3);
      } else {
        st.bits[static_cast<size_t>(s * st.pen.words() + id / 32)] |= 1u << (id % 32);
      }
    }
  }
  st.pen.counts = st.counts.data();
  st.pen.prompt_bits = st.bits.data();
}

// One step: every setting on every shape, plus variants with bias, penalties and logprobs. drafts: every row is a
// draft row (RowParams::draft), judged against accept_drafts_ref.
Compare run_model_step(int32_t n_real, int32_t stride, uint64_t seed, int draws, int variants = 4,
                       bool drafts = false) {
  SampleRng rng(seed);
  Step st;
  fill_penalties(st, n_real, 2, rng);
  for (int i = 0; i < 16; ++i) {
    st.bias_ids.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(n_real + 4)) - 2);
    st.bias_values.push_back(i % 5 == 0 ? -kInf : static_cast<float>(rng.uniform() * 200.0 - 100.0));
  }
  st.bias_ids.push_back(st.bias_ids[1]);  // a duplicate entry
  st.bias_values.push_back(1e-3f);
  Compare cmp;
  for (LogitShape shape : {LogitShape::kFlat, LogitShape::kPeaked, LogitShape::kTied}) {
    for (const Setting& set : kSettings) {
      for (int variant = 0; variant < variants; ++variant) {
        Row row;
        row.n_real = n_real;
        row.logits = voltserve::test::random_logits(stride, shape, rng);
        for (int32_t i = n_real; i < stride; ++i) row.logits[static_cast<size_t>(i)] = 1e30f;  // padding
        RowParams& p = row.params;
        p.flags = kSample | (variant >= 2 ? kLogprobs : 0u);
        p.temperature = set.temperature;
        p.top_p = set.top_p;
        p.min_p = set.min_p;
        p.top_k = set.top_k;
        p.n_top_logprobs = variant == 3 ? kMaxTopLogprobs : 5;
        p.seed = rng.next();
        if (variant == 1) {  // bias and penalties
          p.bias_offset = 1;
          p.bias_count = static_cast<int32_t>(st.bias_ids.size()) - 1;
          p.slot = 1;
          p.repetition_penalty = 1.3f;
          p.presence_penalty = 0.5f;
          p.frequency_penalty = 0.25f;
        }
        for (int d = 0; d < draws; ++d) {
          p.draw_index = static_cast<uint64_t>(d) * 7919;
          const std::string name = std::string(set.name) + " " + voltserve::test::logit_shape_name(shape) +
                                   " v=" + std::to_string(n_real) + " variant=" + std::to_string(variant) +
                                   " draw=" + std::to_string(d);
          if (!drafts) {
            cmp.row(name, model_row(row, st), reference_row(row, st));
            continue;
          }
          p.draft = pick_draft(row, st, d % 4, rng);
          // Penalized rows count pending drafts too: the draft itself, a likely id, any id (0-3 of them).
          p.pending_count = 0;
          std::vector<int32_t> pending;
          for (int i = 0; i < (variant == 1 ? d % 4 : 0); ++i) pending.push_back(i == 0 ? p.draft : pick_draft(row, st, i, rng));
          p.pending_offset = static_cast<int32_t>(st.pending.size());
          p.pending_count = static_cast<int32_t>(pending.size());
          st.pending.insert(st.pending.end(), pending.begin(), pending.end());
          st.pen.pending = st.pending.data();
          const RowOut got = model_row(row, st);
          if (set.temperature > 0.0f && got.status == kRowOk) ++(got.token == p.draft ? cmp.accepted : cmp.rejected);
          cmp.row(name + " draft=" + std::to_string(p.draft), got, reference_draft_row(row, st));
        }
      }
    }
  }
  return cmp;
}

}  // namespace

TEST_CASE("order keys: monotone in the value, -0 == +0, invertible; composites order by (value desc, id asc)",
          "[unit]") {
  SampleRng rng(1);
  std::vector<float> v = {-kInf, -3.0f, -1e-40f, -0.0f, 0.0f, 1e-45f, 1e-38f, 2.5f, 3.4e38f, kInf};
  for (int i = 0; i < 2000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng.next());
    const float f = bits_float(bits);
    if (f == f) v.push_back(f);
  }
  for (float a : v) {
    CHECK(order_key(a) != kNoKey);
    if (a != 0.0f) CHECK(float_bits(key_value(order_key(a))) == float_bits(a));
    for (size_t j = 0; j < 16; ++j) {
      const float b = v[(static_cast<size_t>(float_bits(a)) + j * 131) % v.size()];
      CHECK((order_key(a) > order_key(b)) == (a > b));
      CHECK((order_key(a) == order_key(b)) == (a == b));
    }
  }
  CHECK(key_value(order_key(-0.0f)) == 0.0f);
  CHECK(order_key(neg_inf()) > kNoKey);
  CHECK(composite_key(order_key(1.0f), 7) > composite_key(order_key(1.0f), 8));
  CHECK(composite_key(order_key(1.0f), 248319) > composite_key(order_key(0.999f), 0));
  CHECK(composite_id(composite_key(order_key(-kInf), 123456)) == 123456);
  CHECK(composite_order(composite_key(order_key(2.0f), 0)) == order_key(2.0f));
}

TEST_CASE("process_value equals process_logits_ref bit for bit (with and without a token mask)", "[unit]") {
  SampleRng rng(2);
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t n = 1 + static_cast<int32_t>(rng.next() % 300);
    Step st;
    fill_penalties(st, std::max<int32_t>(1, n - static_cast<int32_t>(rng.next() % 3)), 3, rng);
    std::vector<float> x = voltserve::test::random_logits(n, LogitShape::kFlat, rng);
    x[rng.next() % static_cast<uint64_t>(n)] = kNaN;
    x[rng.next() % static_cast<uint64_t>(n)] = kInf;
    x[rng.next() % static_cast<uint64_t>(n)] = -kInf;
    x[rng.next() % static_cast<uint64_t>(n)] = -0.0f;
    for (int i = 0; i < 30; ++i) {
      st.bias_ids.push_back(static_cast<int32_t>(rng.next() % static_cast<uint64_t>(n + 6)) - 3);
      st.bias_values.push_back(static_cast<float>(rng.uniform() * 20.0 - 10.0));
    }
    RowParams p;
    p.slot = static_cast<int32_t>(rng.next() % 4) - 1;  // -1..2
    p.repetition_penalty = trial % 3 == 0 ? 1.0f : static_cast<float>(0.5 + rng.uniform());
    p.presence_penalty = trial % 4 == 0 ? 0.0f : static_cast<float>(rng.uniform() * 2.0 - 1.0);
    p.frequency_penalty = trial % 5 == 0 ? 0.0f : static_cast<float>(rng.uniform());
    p.bias_offset = static_cast<int32_t>(rng.next() % 10);
    p.bias_count = static_cast<int32_t>(rng.next() % 20);
    // Odd trials: a structured-output mask (second row of two) allowing about a third of the ids.
    const int32_t words = (n + 31) / 32;
    std::vector<uint32_t> masks(static_cast<size_t>(2 * words), 0u);
    for (int32_t id = 0; id < n; ++id) {
      if (rng.next() % 3 == 0) masks[static_cast<size_t>(words + id / 32)] |= 1u << (id % 32);
    }
    if (trial % 2 == 1) p.mask_row = 1;
    std::vector<float> want;
    process_logits_ref(x.data(), n, p, st.bias_ids.data(), st.bias_values.data(), st.pen, want,
                       row_mask(masks.data(), words, p.mask_row));
    const RowProcess rp = row_process(p, st.bias_ids.data(), st.bias_values.data(), st.pen, n, masks.data(), words);
    if (trial % 2 == 1) {
      for (int32_t id = 0; id < n; ++id) {
        if (((masks[static_cast<size_t>(words + id / 32)] >> (id % 32)) & 1u) == 0) CHECK(want[static_cast<size_t>(id)] == -kInf);
      }
    }
    int diff = 0;
    for (int32_t id = 0; id < n; ++id) {
      int32_t count = 0;
      bool in_prompt = false;
      if (has_penalty_state(rp, id)) {
        count = rp.counts[id];
        in_prompt = prompt_bit(rp.prompt_bits[id >> 5], id);
      }
      // The bias loop may be skipped for ids without entries (the device's bitmap); with or without the hint
      // the value is the same for those.
      bool has_entry = false;
      for (int32_t b = 0; b < p.bias_count; ++b) has_entry |= st.bias_ids[static_cast<size_t>(p.bias_offset + b)] == id;
      const float got = process_value(x[static_cast<size_t>(id)], id, has_entry, count, in_prompt, rp);
      diff += float_bits(got) != float_bits(want[static_cast<size_t>(id)]) ? 1 : 0;
    }
    CHECK(diff == 0);
  }
}

TEST_CASE("softmax weights and slice masses match final_distribution_ref", "[unit]") {
  SampleRng rng(3);
  const std::vector<float> x = voltserve::test::random_logits(9000, LogitShape::kPeaked, rng);
  RowParams p;
  p.flags = kSample;
  p.temperature = 0.7f;
  std::vector<std::pair<int32_t, double>> dist;
  final_distribution_ref(x, p, dist);
  uint32_t max_key = kNoKey;
  for (float v : x) max_key = std::max(max_key, order_key(v));
  const Softmax sm = make_softmax(p.temperature, max_key);
  double total = 0.0;
  for (float v : x) total += weight(v, sm);
  for (const auto& [id, prob] : dist) CHECK(std::fabs(weight(x[static_cast<size_t>(id)], sm) / total - prob) <= 1e-15);
  // The slices' rescaled sums give the same total.
  double sliced = 0.0;
  for (int32_t lo = 0; lo < 9000; lo += kSliceSize) {
    SliceStat st{-1, kNoKey, -1, 0, 0, 0, 0, 0.0f, 0.0, 0.0};
    for (int32_t id = lo; id < std::min(9000, lo + kSliceSize); ++id) st.max_key = std::max(st.max_key, order_key(x[static_cast<size_t>(id)]));
    for (int32_t id = lo; id < std::min(9000, lo + kSliceSize); ++id) st.sum_t += slice_term(x[static_cast<size_t>(id)], st.max_key, sm.inv_t);
    sliced += slice_mass(st, sm);
  }
  CHECK(std::fabs(sliced - total) <= 1e-12 * total);
  CHECK(weight(key_value(max_key), sm) == 1.0);
  CHECK(to_fixed(1.0) == uint64_t{1} << 45);
}

TEST_CASE("descents find positions in (value desc, id asc) order: counts, top-p mass, draw mass", "[unit]") {
  SampleRng rng(4);
  for (int trial = 0; trial < 40; ++trial) {
    // Keys with many ties (few distinct values) or none; weights a function of the key.
    const int32_t n = 1 + static_cast<int32_t>(rng.next() % 3000);
    const int32_t distinct = trial % 2 ? 5 : 1 << 30;
    std::vector<uint32_t> key(static_cast<size_t>(n));
    std::vector<uint64_t> wfx(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(static_cast<int64_t>(rng.next() % static_cast<uint64_t>(distinct)) % 1000) * 0.01f - 5.0f;
      key[static_cast<size_t>(i)] = order_key(v);
      wfx[static_cast<size_t>(i)] = to_fixed(std::exp(static_cast<double>(v) - 5.0));
    }
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return key[static_cast<size_t>(a)] != key[static_cast<size_t>(b)] ? key[static_cast<size_t>(a)] > key[static_cast<size_t>(b)] : a < b;
    });
    std::vector<uint64_t> cum(static_cast<size_t>(n));
    uint64_t run = 0;
    for (int32_t j = 0; j < n; ++j) cum[static_cast<size_t>(j)] = run += wfx[static_cast<size_t>(order[static_cast<size_t>(j)])];
    auto descend = [&](SelectMode mode, uint64_t target) {
      Descent r;
      uint32_t prefix = 0;
      uint64_t ca = 0, ma = 0;
      uint32_t hc[256];
      uint64_t hm[256];
      int32_t d = 0;
      for (int level = 0; level < 4; ++level) {
        const int shift = 24 - 8 * level;
        std::fill(hc, hc + 256, 0u);
        std::fill(hm, hm + 256, uint64_t{0});
        for (int32_t i = 0; i < n; ++i) {
          const uint32_t k = key[static_cast<size_t>(i)];
          if (level > 0 && (k >> (shift + 8)) != (prefix >> (shift + 8))) continue;
          ++hc[(k >> shift) & 255];
          hm[(k >> shift) & 255] += wfx[static_cast<size_t>(i)];
        }
        if (!descend_bins(hc, hm, 255, 0, mode, target, &ca, &ma, &d)) return r;
        prefix |= static_cast<uint32_t>(d) << shift;
      }
      r.found = true;
      r.tau = prefix;
      r.count_above = ca;
      r.mass_above = ma;
      r.n_ties = hc[d];
      r.w_tie = hm[d] / hc[d];
      r.tie = tie_position(mode, target, ca, ma, r.w_tie, r.n_ties);
      return r;
    };
    for (int q = 0; q < 30; ++q) {
      // Count: the k-th element.
      const uint64_t k = 1 + rng.next() % static_cast<uint64_t>(n);
      Descent r = descend(SelectMode::kCount, k);
      REQUIRE(r.found);
      CHECK(r.position() == k);
      CHECK(r.tau == key[static_cast<size_t>(order[static_cast<size_t>(k - 1)])]);
      CHECK(r.mass_through() == cum[static_cast<size_t>(k - 1)]);
      // Mass: the first position whose cumulative mass reaches (>=) or passes (>) a target.
      const uint64_t target = static_cast<uint64_t>(rng.uniform() * static_cast<double>(run));
      for (SelectMode mode : {SelectMode::kMassAtLeast, SelectMode::kMassAbove}) {
        size_t want = 0;
        while (want < cum.size() && !select_reached(mode, target, 0, cum[want])) ++want;
        r = descend(mode, target);
        if (want == cum.size()) {
          CHECK_FALSE(r.found);
          continue;
        }
        REQUIRE(r.found);
        CHECK(r.position() == want + 1);
        CHECK(r.tau == key[static_cast<size_t>(order[want])]);
        CHECK(r.mass_through() == cum[want]);
      }
    }
    // Beyond the total: not found; a zero target: the first element.
    CHECK_FALSE(descend(SelectMode::kMassAbove, run).found);
    CHECK(descend(SelectMode::kMassAtLeast, 0).position() == 1);
    CHECK(descend(SelectMode::kMassAbove, 0).position() == 1);
  }
}

TEST_CASE("the CPU model of the device sampler equals sample_ref on small vocabularies", "[unit]") {
  for (int32_t n_real : {1, 2, 5, 17, 64, 65, 300, 4096, 4097, 9000}) {
    const Compare c = run_model_step(n_real, n_real + (n_real % 3), 100 + static_cast<uint64_t>(n_real), 6);
    std::printf("sampling model v=%d rows=%d general=%d token_diff=%d other_diff=%d\n", n_real, c.rows, c.general,
                c.token_diff, c.other_diff);
    CHECK(c.token_diff == 0);
    CHECK(c.other_diff == 0);
  }
}

TEST_CASE("the CPU model of the device sampler equals sample_ref at vocab 248320 (Qwen3.5 lm_head)", "[unit][slow]") {
  const Compare c = run_model_step(248077, 248320, 7, 1, 2);
  std::printf("sampling model v=248077 rows=%d general=%d token_diff=%d other_diff=%d\n", c.rows, c.general,
              c.token_diff, c.other_diff);
  CHECK(c.token_diff == 0);
  CHECK(c.other_diff == 0);
}

TEST_CASE("the CPU model of the device's draft rows equals accept_drafts_ref", "[unit]") {
  // Sampled rows judge their draft where they would draw (over the candidates, or in id order skipping it after a
  // rejection); a rejection never emits the draft; rows whose cut lies past the candidates go to the host.
  for (int32_t n_real : {2, 5, 64, 65, 300, 4097, 9000}) {
    const Compare c = run_model_step(n_real, n_real + 1, 500 + static_cast<uint64_t>(n_real), 8, 4, true);
    std::printf("sampling model drafts v=%d rows=%d accepted=%d rejected=%d general=%d token_diff=%d other_diff=%d\n",
                n_real, c.rows, c.accepted, c.rejected, c.general, c.token_diff, c.other_diff);
    CHECK(c.token_diff == 0);
    CHECK(c.other_diff == 0);
    CHECK(c.accepted > 0);
    CHECK(c.rejected > 0);
    // The flat rows of the larger vocabularies cut past the candidates: the general path judges them.
    if (n_real >= 300) CHECK(c.general > 0);
  }
}

TEST_CASE("the CPU model handles NaN, all -inf, +inf and padding rows as sample_ref does", "[unit]") {
  SampleRng rng(9);
  Step st;
  fill_penalties(st, 9000, 1, rng);
  Compare cmp;
  for (const Setting& set : kSettings) {
    for (int kind = 0; kind < 6; ++kind) {
      Row row;
      row.n_real = 9000;
      row.logits = voltserve::test::random_logits(9100, LogitShape::kPeaked, rng);
      if (kind == 0) row.logits[5000] = row.logits[7000] = kNaN;               // NaN: first one reported
      if (kind == 1) std::fill(row.logits.begin(), row.logits.end(), -kInf);   // nothing samplable
      if (kind == 2) row.logits[100] = row.logits[4100] = row.logits[8999] = kInf;  // +inf share the mass
      if (kind == 3) {  // 100 +inf ids: more than the candidates
        for (int i = 0; i < 100; ++i) row.logits[static_cast<size_t>(i * 89)] = kInf;
      }
      if (kind == 4) row.logits[9050] = kNaN;                                 // NaN in padding: fine
      if (kind == 5) std::fill(row.logits.begin(), row.logits.end(), 0.5f);  // all tied
      row.params.flags = kSample | kLogprobs;
      row.params.temperature = set.temperature;
      row.params.top_p = set.top_p;
      row.params.min_p = set.min_p;
      row.params.top_k = set.top_k;
      row.params.n_top_logprobs = 7;
      for (int d = 0; d < 5; ++d) {
        row.params.seed = rng.next();
        row.params.draw_index = static_cast<uint64_t>(d);
        cmp.row(std::string(set.name) + " kind=" + std::to_string(kind) + " draw=" + std::to_string(d),
                model_row(row, st), reference_row(row, st));
      }
    }
  }
  std::printf("sampling model edge rows=%d general=%d token_diff=%d other_diff=%d\n", cmp.rows, cmp.general,
              cmp.token_diff, cmp.other_diff);
  CHECK(cmp.token_diff == 0);
  CHECK(cmp.other_diff == 0);
}
