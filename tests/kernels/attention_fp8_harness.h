// FP8 (e4m3) KV-cache cases of gated attention's device form, shared by the GPU test (attention_gpu_test.cpp) and the
// CPU test that runs the same kernels through the SIMT emulator (attention_emu_test.cpp). Random e4m3 pages (every
// finite code can occur) with per-layer scales, one call mixing decode, verify and prefill segments; checked against
// the CPU reference (attention_ref.cpp) reading the same pages: output by normalised error (the device decodes the
// same bytes exactly, so only summation order and libm differ), the V bytes the call wrote bit-exact, the K bytes
// within one e4m3 code (the device's RoPE angles round differently), every other cache byte unchanged, no NaN,
// guard bytes after the output and the caches.
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "attention_harness.h"
#include "kernels/common/e4m3_codec.h"

namespace voltserve::test::attn {

struct Fp8Case {
  std::string name;
  Shape shape;
  std::vector<SeqSpec> seqs;  // n_past positions are random pages (never computed), n_tokens computed by the call
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  uint64_t seed = 1;
};

inline std::string fp8_label(const Fp8Case& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "attention fp8 %s H%d/KV%d D%d R%d k_scale=%g v_scale=%g seqs=%s",
                c.shape.name.c_str(), c.shape.p.n_heads, c.shape.p.n_kv_heads, c.shape.p.head_dim,
                c.shape.p.rotary_dim, static_cast<double>(c.k_scale), static_cast<double>(c.v_scale),
                seqs_text(c.seqs).c_str());
  return std::string(buf) + " " + c.name;
}

// Runs one case; true when every check passed.
inline bool run_fp8_case(Device& dev, const Fp8Case& c) {
  const ka::Params& p = c.shape.p;
  const std::string label = fp8_label(c);
  INFO("case " << label);
  SplitMix rng(c.seed);
  const int64_t hd = p.head_dim, kv_width = int64_t{p.n_kv_heads} * hd;
  const int64_t qg_width = int64_t{p.n_heads} * 2 * hd, out_width = int64_t{p.n_heads} * hd;
  // Pages: each sequence's own, from one shuffled pool with spares.
  std::vector<SeqDesc> seqs;
  std::vector<int32_t> page_table;
  int32_t n_rows = 0, max_seq_tokens = 0, max_context = 0, total_pages = 0;
  for (const SeqSpec& s : c.seqs) total_pages += (s.n_past + s.n_tokens + p.page_size - 1) / p.page_size;
  const int32_t n_pages = total_pages + 3;
  std::vector<int32_t> perm(static_cast<size_t>(n_pages));
  for (int32_t i = 0; i < n_pages; ++i) perm[static_cast<size_t>(i)] = i;
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
  size_t next = 0;
  for (const SeqSpec& s : c.seqs) {
    SeqDesc d{};
    d.row0 = n_rows;
    d.n_tokens = s.n_tokens;
    d.n_past = s.n_past;
    d.page_offset = static_cast<int32_t>(page_table.size());
    const int32_t need = (s.n_past + s.n_tokens + p.page_size - 1) / p.page_size;
    for (int32_t i = 0; i < need; ++i) page_table.push_back(perm[next++]);
    seqs.push_back(d);
    n_rows += s.n_tokens;
    max_seq_tokens = std::max(max_seq_tokens, s.n_tokens);
    max_context = std::max(max_context, s.n_past + s.n_tokens);
  }
  // Caches: e4m3 of random values around the scales' range (every finite code but the largest ones is likely).
  const size_t cache_elems = static_cast<size_t>(n_pages) * p.page_size * kv_width;
  std::vector<uint8_t> k0(cache_elems), v0(cache_elems);
  for (size_t i = 0; i < cache_elems; ++i) {
    k0[i] = fp::float_to_e4m3(static_cast<float>((rng.uniform() * 3.4 - 1.7) / c.k_scale));
    v0[i] = fp::float_to_e4m3(static_cast<float>((rng.uniform() * 2.0 - 1.0) / c.v_scale));
  }
  std::vector<float> qg(static_cast<size_t>(n_rows * qg_width)), k(static_cast<size_t>(n_rows * kv_width)),
      v(static_cast<size_t>(n_rows * kv_width));
  for (auto& x : qg) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  for (auto& x : k) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  for (auto& x : v) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  std::vector<float> q_norm(static_cast<size_t>(hd)), k_norm(static_cast<size_t>(hd));
  for (auto& w : q_norm) w = static_cast<float>(0.6 + rng.uniform());
  for (auto& w : k_norm) w = static_cast<float>(0.6 + rng.uniform());

  // Reference on host copies of the same pages.
  std::vector<uint8_t> ref_k = k0, ref_v = v0;
  std::vector<float> ref_out(static_cast<size_t>(n_rows * out_width), 0.0f);
  ThreadPool pool;
  ka::RefArgs r;
  r.qg = qg.data();
  r.qg_stride = qg_width;
  r.k = k.data();
  r.k_stride = kv_width;
  r.v = v.data();
  r.v_stride = kv_width;
  r.q_norm = q_norm.data();
  r.k_norm = k_norm.data();
  r.k_cache = ref_k.data();
  r.v_cache = ref_v.data();
  r.cache_dtype = DType::kF8E4M3;
  r.k_scale = c.k_scale;
  r.v_scale = c.v_scale;
  r.seqs = seqs.data();
  r.n_seqs = static_cast<int32_t>(seqs.size());
  r.page_table = page_table.data();
  r.out = ref_out.data();
  r.out_stride = out_width;
  r.parallel = &pool;
  ka::gated_attention_ref(p, r);

  // Device.
  Buf d_qg(dev, qg.size() * 4), d_k(dev, k.size() * 4), d_v(dev, v.size() * 4), d_qn(dev, q_norm.size() * 4),
      d_kn(dev, k_norm.size() * 4), d_kc(dev, cache_elems), d_vc(dev, cache_elems), d_seqs(dev, seqs.size() * sizeof(SeqDesc)),
      d_pages(dev, page_table.size() * 4), d_out(dev, ref_out.size() * 4);
  d_qg.put(qg);
  d_k.put(k);
  d_v.put(v);
  d_qn.put(q_norm);
  d_kn.put(k_norm);
  d_kc.put(k0);
  d_vc.put(v0);
  d_seqs.put(seqs);
  d_pages.put(page_table);
  dev.fill(d_out.get(), kPoisonByte, d_out.bytes());
  const size_t ws_bytes = ka::workspace_bytes(p, n_rows, static_cast<int32_t>(seqs.size()), max_seq_tokens, max_context);
  Buf d_ws(dev, ws_bytes);
  ka::DeviceArgs a;
  a.qg = static_cast<const float*>(d_qg.get());
  a.qg_stride = qg_width;
  a.k = static_cast<const float*>(d_k.get());
  a.k_stride = kv_width;
  a.v = static_cast<const float*>(d_v.get());
  a.v_stride = kv_width;
  a.q_norm = static_cast<const float*>(d_qn.get());
  a.k_norm = static_cast<const float*>(d_kn.get());
  a.k_cache = d_kc.get();
  a.v_cache = d_vc.get();
  a.cache_dtype = DType::kF8E4M3;
  a.k_scale = c.k_scale;
  a.v_scale = c.v_scale;
  a.seqs = static_cast<const SeqDesc*>(d_seqs.get());
  a.n_seqs = static_cast<int32_t>(seqs.size());
  a.page_table = static_cast<const int32_t*>(d_pages.get());
  a.out = d_out.get();
  a.out_stride = out_width;
  a.out_dtype = DType::kF32;
  a.n_rows = n_rows;
  a.max_seq_tokens = max_seq_tokens;
  a.max_context = max_context;
  a.workspace = d_ws.get();
  a.workspace_bytes = ws_bytes;
  const KernelStatus st = dev.run(p, a);
  INFO("status " << st.message);
  REQUIRE(st.ok());

  bool ok = true;
  const std::vector<float> out = d_out.get_all<float>();
  const std::vector<uint8_t> dev_k = d_kc.get_all<uint8_t>(), dev_v = d_vc.get_all<uint8_t>();
  int64_t nan = 0;
  std::vector<double> od, orf;
  for (size_t i = 0; i < out.size(); ++i) {
    nan += std::isnan(out[i]) ? 1 : 0;
    od.push_back(out[i]);
    orf.push_back(ref_out[i]);
  }
  const double err = normalised_error(od, orf);
  // Cache bytes: V exactly as the reference wrote it, K within one code in the rows the call wrote, every other
  // byte as it was.
  std::vector<uint8_t> written(cache_elems, 0);
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int32_t t = 0; t < seqs[i].n_tokens; ++t) {
      const int64_t crow = kd::cache_row(page_table.data(), seqs[i].page_offset, p.page_size, seqs[i].n_past + t);
      std::fill_n(written.begin() + crow * kv_width, kv_width, uint8_t{1});
    }
  }
  int64_t v_diff = 0, k_far = 0, k_near = 0;
  for (size_t i = 0; i < cache_elems; ++i) {
    if (dev_v[i] != ref_v[i]) ++v_diff;
    if (dev_k[i] == ref_k[i]) continue;
    const bool neighbour = ((dev_k[i] ^ ref_k[i]) & 0x80) == 0 && std::abs(int(dev_k[i] & 0x7F) - int(ref_k[i] & 0x7F)) == 1;
    if (written[i] && neighbour) {
      ++k_near;
    } else {
      ++k_far;
    }
  }
  const bool guards = d_out.guard_ok() && d_kc.guard_ok() && d_vc.guard_ok() && d_ws.guard_ok();
  const bool pass = err <= tol::kAttentionStrictF32 * 100 && nan == 0 && v_diff == 0 && k_far == 0 &&
                    guards;
  std::printf("%s err=%.3g nan=%lld v_bytes_diff=%lld k_bytes_one_code=%lld k_bytes_far=%lld guards=%s %s\n",
              label.c_str(), err, static_cast<long long>(nan), static_cast<long long>(v_diff),
              static_cast<long long>(k_near), static_cast<long long>(k_far), guards ? "ok" : "BAD", pass ? "ok" : "FAIL");
  CHECK(err <= tol::kAttentionStrictF32 * 100);
  CHECK(nan == 0);
  CHECK(v_diff == 0);
  CHECK(k_far == 0);
  CHECK(guards);
  ok &= pass;
  return ok;
}

// Tiny and 27B shapes; decode (contexts 1 .. 3000: split context), verify (4 and 16 rows), prefill (40 rows on a
// context); scales 1 and the kind a ModelOpt export carries.
inline std::vector<Fp8Case> fp8_cases(bool large) {
  std::vector<Fp8Case> cases;
  const std::vector<SeqSpec> mix = {{0, 1}, {37, 1}, {300, 4}, {0, 40}, {129, 16}, {70, 33}};
  cases.push_back({"mix", shape_tiny(32), mix, 1.0f, 1.0f, 11});
  cases.push_back({"mix", shape_tiny(16), mix, 0.0123f, 0.37f, 12});
  cases.push_back({"mix", shape_27b(), {{5, 1}, {200, 4}, {0, 24}}, 0.05f, 0.02f, 13});
  if (large) {
    cases.push_back({"long", shape_27b(), {{3000, 1}, {2999, 8}, {17000, 1}}, 0.05f, 0.02f, 14});
    cases.push_back({"prefill", shape_27b(), {{0, 512}, {1500, 200}}, 1.0f, 1.0f, 15});
  }
  return cases;
}

}  // namespace voltserve::test::attn
