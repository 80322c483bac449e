// The fused attention read of ``MemoryReads.attend`` (memory_reads.py) on the CPU: a masked softmax over
// a memory's slots against a key, and the glimpse it weights, in one pass over each row's memory, and
// their backward pass in one more.
//
//   M (B, S, E) the memory, key (B, E), mask (B, S) bool (true = a real slot)
//
//   s_i = m_i . key,   att = softmax(s) over the real slots, 0 elsewhere (all 0 in a row with none),
//   glimpse = sum_i att_i m_i
//
// Forward: the slots are taken in blocks of 16 real ones; a block's scores are computed, the running
// maximum raised (the glimpse's running sum and the softmax's total rescaled when it rises), and the
// block's rows added to the glimpse with weights exp(s_i - max) while they are still in the L1 cache:
// each row of M comes from memory once (an online softmax). The scores are kept in ``att`` and turned
// into the weights at the end.
//
// Backward, with g = dL/dglimpse and e = dL/datt from the uses of att elsewhere (either may be absent,
// passed as an empty tensor): through the glimpse and the softmax,
//
//   ds_i = att_i (g . m_i + e_i - c),   c = g . glimpse + sum_j att_j e_j,   dkey = sum_i ds_i m_i,
//
// again one pass over the row (g . m_i for a block, then the block's rows into dkey). The gradient of
// M (the factors ds key^T and att g^T) is left to the caller, who forms it once for all reads.
//
// Threads: the rows are split between torch's threads; a row is one thread's work from start to end,
// so the results do not depend on the number of threads.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "simd_math.h"

namespace {

using at::Tensor;
using namespace memread_simd;

constexpr int64_t kBlock = 16;  // real slots per block: 16 rows of E numbers stay in L1 between their two uses

// e^x for x <= 0 (the softmax's exp(s - max)). double: std::exp. float: a branch-free form the compiler
// vectorises, 2^n e^r with n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2] (ln2 in two parts), e^r by
// its Taylor series to r^7 (at most 1.3 ulps from e^x over every float in [-87, 0]); 0 below -87 (where
// e^x leaves float's normal range); x > 0 is taken as 0 (such values are masked slots, dropped after)
inline double exp_k(double x) { return std::exp(x); }

inline float exp_k(float x) {
  const float y = std::min(std::max(x, -87.0f), 0.0f);
  const int32_t n = static_cast<int32_t>(y * 1.44269504f - 0.5f);  // round(y / ln2) for y <= 0
  const float nf = static_cast<float>(n);
  const float r = (y - nf * 0.693145752f) - nf * 1.42860677e-06f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;  // e^r
  const float scale = __builtin_bit_cast(float, (n + 127) << 23);  // 2^n, n >= -126
  return x < -87.0f ? 0.0f : p * scale;
}

// out_k = exp(x_k - shift) for k < n (out may be x)
template <typename scalar_t>
inline void exp_shifted(const scalar_t* x, scalar_t shift, scalar_t* out, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) out[k] = exp_k(x[k] - shift);
}

// One 64-byte vector of scalar_t (GCC / clang vector extensions: one AVX-512 register, two AVX2 ones),
// loaded and stored unaligned
template <typename scalar_t> struct Vec;
template <> struct Vec<float> { typedef float type __attribute__((vector_size(64), aligned(4))); };
template <> struct Vec<double> { typedef double type __attribute__((vector_size(64), aligned(8))); };

template <typename scalar_t>
inline typename Vec<scalar_t>::type load(const scalar_t* p) { return *reinterpret_cast<const typename Vec<scalar_t>::type*>(p); }
template <typename scalar_t>
inline void store(scalar_t* p, typename Vec<scalar_t>::type v) { *reinterpret_cast<typename Vec<scalar_t>::type*>(p) = v; }
template <typename scalar_t>
inline scalar_t hsum(typename Vec<scalar_t>::type v) {
  constexpr int64_t W = 64 / sizeof(scalar_t);
  scalar_t s = 0;
  for (int64_t j = 0; j < W; ++j) s += v[j];
  return s;
}

// out_r = v . X_{idx_r} for r < m, four rows at a time, each with its own vector accumulator
// (independent chains of multiply-adds; each vector of v loaded once for four rows)
template <typename scalar_t>
inline void dots(const scalar_t* __restrict__ v, const scalar_t* __restrict__ X, const int64_t* idx, int64_t m,
                 int64_t ld, int64_t n, scalar_t* __restrict__ out) {
  using V = typename Vec<scalar_t>::type;
  constexpr int64_t W = 64 / sizeof(scalar_t);
  const int64_t n0 = n - n % W;
  int64_t r0 = 0;
  for (; r0 + 4 <= m; r0 += 4) {
    const scalar_t* __restrict__ x0 = X + idx[r0] * ld;
    const scalar_t* __restrict__ x1 = X + idx[r0 + 1] * ld;
    const scalar_t* __restrict__ x2 = X + idx[r0 + 2] * ld;
    const scalar_t* __restrict__ x3 = X + idx[r0 + 3] * ld;
    V a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int64_t k = 0; k < n0; k += W) {
      const V vk = load(v + k);
      a0 += vk * load(x0 + k), a1 += vk * load(x1 + k), a2 += vk * load(x2 + k), a3 += vk * load(x3 + k);
    }
    scalar_t s0 = hsum<scalar_t>(a0), s1 = hsum<scalar_t>(a1), s2 = hsum<scalar_t>(a2), s3 = hsum<scalar_t>(a3);
    for (int64_t k = n0; k < n; ++k) s0 += v[k] * x0[k], s1 += v[k] * x1[k], s2 += v[k] * x2[k], s3 += v[k] * x3[k];
    out[r0] = s0, out[r0 + 1] = s1, out[r0 + 2] = s2, out[r0 + 3] = s3;
  }
  for (; r0 < m; ++r0) {
    const scalar_t* __restrict__ x = X + idx[r0] * ld;
    V a = {};
    for (int64_t k = 0; k < n0; k += W) a += load(v + k) * load(x + k);
    scalar_t s = hsum<scalar_t>(a);
    for (int64_t k = n0; k < n; ++k) s += v[k] * x[k];
    out[r0] = s;
  }
}

// y += sum_i w_i X_{idx_i} (rows of length n, ``ld`` apart): the running sums of eight (AVX-512: 32
// registers) or four (AVX2 / SSE: 16) vectors of y stay in registers while the rows stream past,
// independent chains of multiply-adds
#if defined(__AVX512F__)
constexpr bool kEightAccumulators = true;
#else
constexpr bool kEightAccumulators = false;
#endif

template <typename scalar_t>
inline void weighted_rows(const scalar_t* __restrict__ w, const scalar_t* __restrict__ X, const int64_t* idx, int64_t m,
                          int64_t ld, scalar_t* __restrict__ y, int64_t n) {
  using V = typename Vec<scalar_t>::type;
  constexpr int64_t W = 64 / sizeof(scalar_t);
  int64_t k = 0;
  if constexpr (kEightAccumulators) {
    for (; k + 8 * W <= n; k += 8 * W) {
      V a0 = load(y + k), a1 = load(y + k + W), a2 = load(y + k + 2 * W), a3 = load(y + k + 3 * W);
      V a4 = load(y + k + 4 * W), a5 = load(y + k + 5 * W), a6 = load(y + k + 6 * W), a7 = load(y + k + 7 * W);
      for (int64_t i = 0; i < m; ++i) {
        const scalar_t wi = w[i];
        const scalar_t* __restrict__ x = X + idx[i] * ld + k;
        a0 += wi * load(x), a1 += wi * load(x + W), a2 += wi * load(x + 2 * W), a3 += wi * load(x + 3 * W);
        a4 += wi * load(x + 4 * W), a5 += wi * load(x + 5 * W), a6 += wi * load(x + 6 * W), a7 += wi * load(x + 7 * W);
      }
      store(y + k, a0), store(y + k + W, a1), store(y + k + 2 * W, a2), store(y + k + 3 * W, a3);
      store(y + k + 4 * W, a4), store(y + k + 5 * W, a5), store(y + k + 6 * W, a6), store(y + k + 7 * W, a7);
    }
  }
  for (; k + 4 * W <= n; k += 4 * W) {
    V a0 = load(y + k), a1 = load(y + k + W), a2 = load(y + k + 2 * W), a3 = load(y + k + 3 * W);
    for (int64_t i = 0; i < m; ++i) {
      const scalar_t wi = w[i];
      const scalar_t* __restrict__ x = X + idx[i] * ld + k;
      a0 += wi * load(x), a1 += wi * load(x + W), a2 += wi * load(x + 2 * W), a3 += wi * load(x + 3 * W);
    }
    store(y + k, a0), store(y + k + W, a1), store(y + k + 2 * W, a2), store(y + k + 3 * W, a3);
  }
  for (; k + W <= n; k += W) {
    V a = load(y + k);
    for (int64_t i = 0; i < m; ++i) a += w[i] * load(X + idx[i] * ld + k);
    store(y + k, a);
  }
  if (k < n)
    for (int64_t i = 0; i < m; ++i) axpy(w[i], X + idx[i] * ld + k, y + k, n - k);
}

template <typename scalar_t>
void forward_row(const scalar_t* __restrict__ Mb, const scalar_t* __restrict__ key, const bool* mask, int64_t S,
                 int64_t E, scalar_t* __restrict__ att, scalar_t* __restrict__ glimpse) {
  int64_t idx[kBlock];
  scalar_t sc[kBlock], p[kBlock];
  scalar_t mx = -std::numeric_limits<scalar_t>::infinity(), total = 0;
  if (glimpse) std::fill_n(glimpse, E, scalar_t(0));
  int64_t i = 0;
  while (i < S) {
    int64_t n = 0;
    for (; i < S && n < kBlock; ++i) {
      if (mask[i]) idx[n++] = i;
      else att[i] = 0;
    }
    if (n == 0) break;
    dots(key, Mb, idx, n, E, E, sc);
    scalar_t block_max = -std::numeric_limits<scalar_t>::infinity();
    for (int64_t k = 0; k < n; ++k) {
      att[idx[k]] = sc[k];  // the score, for now
      block_max = std::max(block_max, sc[k]);
    }
    if (block_max > mx) {  // rescale what was summed under the old maximum
      if (total > 0) {
        const scalar_t r = std::exp(mx - block_max);
        total *= r;
        if (glimpse)
#pragma omp simd
          for (int64_t k = 0; k < E; ++k) glimpse[k] *= r;
      }
      mx = block_max;
    }
    if (!glimpse) continue;  // the weights are formed at the end
    exp_shifted(sc, mx, p, n);
    for (int64_t k = 0; k < n; ++k) total += p[k];
    weighted_rows(p, Mb, idx, n, E, glimpse, E);
  }
  if (mx == -std::numeric_limits<scalar_t>::infinity()) {  // no real slot: all zero, as masked_softmax gives
    std::fill_n(att, S, scalar_t(0));
    if (glimpse) std::fill_n(glimpse, E, scalar_t(0));
    return;
  }
  exp_shifted(att, mx, att, S);
  scalar_t sum = 0;
  for (int64_t j = 0; j < S; ++j) sum += (att[j] = mask[j] ? att[j] : scalar_t(0));
  if (!glimpse) total = sum;
  const scalar_t inv = scalar_t(1) / total;
#pragma omp simd
  for (int64_t j = 0; j < S; ++j) att[j] *= inv;
  if (glimpse)
#pragma omp simd
    for (int64_t k = 0; k < E; ++k) glimpse[k] *= inv;
}

template <typename scalar_t>
void backward_row(const scalar_t* __restrict__ Mb, const scalar_t* __restrict__ att, const scalar_t* glimpse,
                  const scalar_t* g, const scalar_t* e, int64_t S, int64_t E, scalar_t* __restrict__ ds,
                  scalar_t* __restrict__ dkey) {
  int64_t idx[kBlock];
  scalar_t w[kBlock];
  scalar_t c = 0;
  if (g) c += dot(g, glimpse, E);
  if (e) c += dot(att, e, S);
  std::fill_n(dkey, E, scalar_t(0));
  int64_t i = 0;
  while (i < S) {
    int64_t n = 0;
    for (; i < S && n < kBlock; ++i) {
      ds[i] = 0;
      if (att[i] != 0) idx[n++] = i;  // a masked slot (or one of no weight): nothing flows through it
    }
    if (n == 0) break;
    if (g) dots(g, Mb, idx, n, E, E, w);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t j = idx[k];
      const scalar_t v = (g ? w[k] : scalar_t(0)) + (e ? e[j] : scalar_t(0));
      ds[j] = w[k] = att[j] * (v - c);
    }
    weighted_rows(w, Mb, idx, n, E, dkey, E);
  }
}

void check(const Tensor& x, const char* name) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(), "attend kernels: ", name, " must be a contiguous CPU tensor");
}

// (att (B, S), glimpse (B, E), or an empty tensor when ``with_glimpse`` is false)
std::tuple<Tensor, Tensor> attend_forward(const Tensor& M, const Tensor& key, const Tensor& mask, bool with_glimpse) {
  check(M, "M"), check(key, "key"), check(mask, "mask");
  TORCH_CHECK(M.dim() == 3 && key.dim() == 2 && mask.dim() == 2, "attend kernels: M (B, S, E), key (B, E), mask (B, S)");
  const int64_t B = M.size(0), S = M.size(1), E = M.size(2);
  TORCH_CHECK(key.size(0) == B && key.size(1) == E && mask.size(0) == B && mask.size(1) == S,
              "attend kernels: shapes do not match");
  TORCH_CHECK(mask.scalar_type() == at::kBool && key.scalar_type() == M.scalar_type(),
              "attend kernels: mask must be bool and key of M's dtype");
  Tensor att = M.new_empty({B, S});
  Tensor glimpse = with_glimpse ? M.new_empty({B, E}) : M.new_empty({0});
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(M.scalar_type(), "attend_forward", [&] {
    const scalar_t* Mp = M.data_ptr<scalar_t>();
    const scalar_t* kp = key.data_ptr<scalar_t>();
    const bool* mp = mask.data_ptr<bool>();
    scalar_t* ap = att.data_ptr<scalar_t>();
    scalar_t* gp = with_glimpse ? glimpse.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        forward_row(Mp + b * S * E, kp + b * E, mp + b * S, S, E, ap + b * S, gp ? gp + b * E : nullptr);
    });
  });
  return {att, glimpse};
}

// (ds (B, S), dkey (B, E)); g (B, E) with glimpse (B, E), and e (B, S): each an empty tensor when absent
std::tuple<Tensor, Tensor> attend_backward(const Tensor& M, const Tensor& att, const Tensor& glimpse, const Tensor& g,
                                           const Tensor& e) {
  check(M, "M"), check(att, "att");
  const int64_t B = M.size(0), S = M.size(1), E = M.size(2);
  const bool has_g = g.numel() > 0, has_e = e.numel() > 0;
  if (has_g) {
    check(g, "g"), check(glimpse, "glimpse");
    TORCH_CHECK(g.sizes() == glimpse.sizes() && g.size(0) == B && g.size(1) == E, "attend kernels: g and glimpse (B, E)");
  }
  if (has_e) {
    check(e, "e");
    TORCH_CHECK(e.sizes() == att.sizes(), "attend kernels: e (B, S)");
  }
  TORCH_CHECK(att.size(0) == B && att.size(1) == S, "attend kernels: att (B, S)");
  Tensor ds = M.new_empty({B, S});
  Tensor dkey = M.new_empty({B, E});
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(M.scalar_type(), "attend_backward", [&] {
    const scalar_t* Mp = M.data_ptr<scalar_t>();
    const scalar_t* ap = att.data_ptr<scalar_t>();
    const scalar_t* glp = has_g ? glimpse.data_ptr<scalar_t>() : nullptr;
    const scalar_t* gp = has_g ? g.data_ptr<scalar_t>() : nullptr;
    const scalar_t* ep = has_e ? e.data_ptr<scalar_t>() : nullptr;
    scalar_t* dsp = ds.data_ptr<scalar_t>();
    scalar_t* dkp = dkey.data_ptr<scalar_t>();
    at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b)
        backward_row(Mp + b * S * E, ap + b * S, glp ? glp + b * E : nullptr, gp ? gp + b * E : nullptr,
                     ep ? ep + b * S : nullptr, S, E, dsp + b * S, dkp + b * E);
    });
  });
  return {ds, dkey};
}

}  // namespace

TORCH_LIBRARY(memread_attend, m) {
  m.def("forward(Tensor M, Tensor key, Tensor mask, bool with_glimpse) -> (Tensor, Tensor)");
  m.def("backward(Tensor M, Tensor att, Tensor glimpse, Tensor g, Tensor e) -> (Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(memread_attend, CPU, m) {
  m.impl("forward", &attend_forward);
  m.impl("backward", &attend_backward);
}
