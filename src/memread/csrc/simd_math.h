// Vector helpers shared by memread's compiled loops (readers/_lstmn_kernels.cpp,
// modules/_window_kernels.cpp): dot products, axpy, weighted row sums and a float tanh that the
// compiler vectorises. Plain loops under `omp simd`; the sources are built with -O3 -fopenmp-simd
// -fno-math-errno -fno-trapping-math and the CPU's vector flags (memread/_compiled.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace memread_simd {

// x . y, vectorised (the order of the additions is not sequential)
template <typename scalar_t>
inline scalar_t dot(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, int64_t n) {
  scalar_t acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < n; ++k) acc += x[k] * y[k];
  return acc;
}

// y += a x
template <typename scalar_t>
inline void axpy(scalar_t a, const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) y[k] += a * x[k];
}

// y += sum_i w_i X_i over m rows X_i = X + i ld (length n): the running sums of a block of y stay in
// registers while the rows stream past
template <typename scalar_t>
inline void weighted_sum(const scalar_t* __restrict__ w, const scalar_t* __restrict__ X, int64_t m, int64_t ld,
                         scalar_t* __restrict__ y, int64_t n) {
  constexpr int64_t blk = 64 / sizeof(scalar_t) * 4;  // four vector registers
  int64_t k0 = 0;
  for (; k0 + blk <= n; k0 += blk) {
    scalar_t acc[blk];
#pragma omp simd
    for (int64_t j = 0; j < blk; ++j) acc[j] = y[k0 + j];
    for (int64_t i = 0; i < m; ++i) {
      const scalar_t wi = w[i];
      const scalar_t* __restrict__ x = X + i * ld + k0;
#pragma omp simd
      for (int64_t j = 0; j < blk; ++j) acc[j] += wi * x[j];
    }
#pragma omp simd
    for (int64_t j = 0; j < blk; ++j) y[k0 + j] = acc[j];
  }
  if (k0 < n)
    for (int64_t i = 0; i < m; ++i) axpy(w[i], X + i * ld + k0, y + k0, n - k0);
}

// tanh for the fused loops over the window. double: std::tanh. float: a branch-free form the compiler
// vectorises, tanh|x| = -m / (2 + m) with m = expm1(-2|x|) = 2^n (e^r - 1) + (2^n - 1), r in [-ln2/2, ln2/2],
// e^r - 1 by its Taylor series to r^7 (with or without the r^8 term the error measures at most
// 2.5 ulps from tanh over [-10, 10]; torch's own: 1)
inline double tanh_k(double x) { return std::tanh(x); }

inline float tanh_k(float x) {
  const float ax = std::min(std::fabs(x), 9.0f);  // tanh(9) is 1 in float
  const float y = -2.0f * ax;  // in [-18, 0]
  const int32_t n = static_cast<int32_t>(y * 1.44269504f - 0.5f);  // round(y / ln2), toward the nearer
  const float nf = static_cast<float>(n);
  const float r = (y - nf * 0.693145752f) - nf * 1.42860677e-06f;  // y - n ln2, ln2 in two parts
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  const float em1_r = p * r;  // e^r - 1
  const float scale = __builtin_bit_cast(float, (n + 127) << 23);  // 2^n (C++17: no std::bit_cast)
  const float m = scale * em1_r + (scale - 1.0f);  // e^y - 1
  const float t = -m / (2.0f + m);
  return std::copysign(t, x);
}

// A loop of tanh_k vectorises; its scalar remainder would cost as much as the vector part for lengths
// like 300 = 18 x 16 + 12, so the last n % 16 values are computed as one padded vector here.
// tanh(c (x_k + y_k)) for k < n (n < 16) into out[0 .. n)
template <typename scalar_t>
inline void tanh_tail(const scalar_t* x, const scalar_t* y, scalar_t c, int64_t n, scalar_t* out) {
  scalar_t a[16] = {}, u[16];
  for (int64_t j = 0; j < n; ++j) a[j] = c * (x[j] + y[j]);
#pragma omp simd
  for (int64_t j = 0; j < 16; ++j) u[j] = tanh_k(a[j]);
  for (int64_t j = 0; j < n; ++j) out[j] = u[j];
}

template <typename scalar_t>
inline int64_t vector_part(int64_t n) { return std::is_same_v<scalar_t, float> ? n & ~int64_t(15) : n; }

// out_k = tanh(c (x_k + y_k)) for k < n
template <typename scalar_t>
inline void tanh_sum(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y, scalar_t c,
                     scalar_t* __restrict__ out, int64_t n) {
  const int64_t n16 = vector_part<scalar_t>(n);
#pragma omp simd
  for (int64_t k = 0; k < n16; ++k) out[k] = tanh_k(c * (x[k] + y[k]));
  if (n16 < n) tanh_tail(x + n16, y + n16, c, n - n16, out + n16);
}

}  // namespace memread_simd
