// The banded window attention of Daniluk et al. (2017), equations (1)-(3) (and (7)-(9)) after the
// projections, for every position of a segment at once, forward and backward, on the CPU: what
// ``_BandedAttention`` in window.py computes with tensor ops, in one pass over each position's window.
//
//   WY (B, L+T, d) = W^Y keys of [window ; segment],  q (B, T, d) = W^h q_t,  w (d,),
//   values (B, L+T, dv),  vis (B, T, L) bool: slot j of position t (slot t + j of the sequence) is visible
//
//   M_tj  = tanh(WY_{t+j} + q_t)          (1)   kept for the backward pass
//   a_t   = softmax_j(w . M_tj) over the visible slots, 0 elsewhere (all 0 when none is)   (2)
//   r_t   = sum_j a_tj values_{t+j}       (3)
//
// Threads: the forward pass splits the (row, position) pairs between torch's threads; the backward
// pass splits the rows (positions of one row share slots, so a row is one thread's), keeps dw per row
// and adds the rows up in order afterwards: the results do not depend on the number of threads.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "simd_math.h"

namespace {

using at::Tensor;
using namespace memread_simd;

template <typename scalar_t>
void forward_impl(const Tensor& WY, const Tensor& q, const Tensor& w, const Tensor& values, const Tensor& vis,
                  Tensor& r, Tensor& alpha, Tensor& M) {
  const int64_t B = q.size(0), T = q.size(1), d = q.size(2), L = WY.size(1) - T, dv = values.size(2);
  const scalar_t* wy = WY.data_ptr<scalar_t>();
  const scalar_t* qp = q.data_ptr<scalar_t>();
  const scalar_t* wp = w.data_ptr<scalar_t>();
  const scalar_t* vals = values.data_ptr<scalar_t>();
  const bool* visp = vis.data_ptr<bool>();
  scalar_t* rp = r.data_ptr<scalar_t>();
  scalar_t* ap = alpha.data_ptr<scalar_t>();
  scalar_t* Mp = M.data_ptr<scalar_t>();
  at::parallel_for(0, B * T, 16, [&](int64_t p0, int64_t p1) {
    std::vector<scalar_t> score(L);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / T, t = p % T;
      const bool* v = visp + p * L;
      scalar_t* a = ap + p * L;
      scalar_t* rt = rp + p * dv;
      std::fill_n(rt, dv, scalar_t(0));
      scalar_t m = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        scalar_t* Mtj = Mp + (p * L + j) * d;
        if (!v[j]) {
          std::fill_n(Mtj, d, scalar_t(0));
          continue;
        }
        tanh_sum(wy + (b * (L + T) + t + j) * d, qp + p * d, scalar_t(1), Mtj, d);  // (1)
        score[j] = dot(wp, Mtj, d);
        m = std::max(m, score[j]);
      }
      scalar_t total = 0;
      for (int64_t j = 0; j < L; ++j) total += (a[j] = v[j] ? std::exp(score[j] - m) : scalar_t(0));
      if (total == 0) continue;  // nothing visible: a_t = 0, r_t = 0
      for (int64_t j = 0; j < L; ++j) a[j] /= total;  // (2)
      weighted_sum(a, vals + (b * (L + T) + t) * dv, L, dv, rt, dv);  // (3)
    }
  });
}

template <typename scalar_t>
void backward_impl(const Tensor& dr, const Tensor& M, const Tensor& alpha, const Tensor& w, const Tensor& values,
                   Tensor& dWY, Tensor& dq, Tensor& dw, Tensor& dvalues) {
  const int64_t B = alpha.size(0), T = alpha.size(1), L = alpha.size(2), d = M.size(3), dv = values.size(2);
  const scalar_t* drp = dr.data_ptr<scalar_t>();
  const scalar_t* Mp = M.data_ptr<scalar_t>();
  const scalar_t* ap = alpha.data_ptr<scalar_t>();
  const scalar_t* wp = w.data_ptr<scalar_t>();
  const scalar_t* vals = values.data_ptr<scalar_t>();
  scalar_t* dwy = dWY.data_ptr<scalar_t>();
  scalar_t* dqp = dq.data_ptr<scalar_t>();
  scalar_t* dvals = dvalues.data_ptr<scalar_t>();
  std::vector<scalar_t> dw_rows(B * d, scalar_t(0));
  at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<scalar_t> da(L);
    for (int64_t b = b0; b < b1; ++b) {
      scalar_t* dwb = dw_rows.data() + b * d;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t p = b * T + t;
        const scalar_t* a = ap + p * L;
        const scalar_t* drt = drp + p * dv;
        const int64_t slot0 = b * (L + T) + t;  // slot of j = 0
        scalar_t sum = 0;
        for (int64_t j = 0; j < L; ++j) {  // (3): d a_tj = dr_t . values_{t+j}, d values_{t+j} += a_tj dr_t
          if (a[j] == 0) {  // not visible (or no weight at all): nothing flows through this slot
            da[j] = 0;
            continue;
          }
          da[j] = dot(drt, vals + (slot0 + j) * dv, dv);
          axpy(a[j], drt, dvals + (slot0 + j) * dv, dv);
          sum += a[j] * da[j];
        }
        scalar_t* __restrict__ dqt = dqp + p * d;
        for (int64_t j = 0; j < L; ++j) {
          if (a[j] == 0) continue;
          const scalar_t ds = a[j] * (da[j] - sum);  // (2): the softmax's backward
          const scalar_t* __restrict__ Mtj = Mp + (p * L + j) * d;
          scalar_t* __restrict__ dk = dwy + (slot0 + j) * d;
#pragma omp simd
          for (int64_t k = 0; k < d; ++k) {  // (1): tanh' = 1 - M^2
            const scalar_t g = ds * wp[k] * (1 - Mtj[k] * Mtj[k]);
            dk[k] += g;
            dqt[k] += g;
            dwb[k] += ds * Mtj[k];
          }
        }
      }
    }
  });
  scalar_t* dwp = dw.data_ptr<scalar_t>();
  for (int64_t b = 0; b < B; ++b) axpy(scalar_t(1), dw_rows.data() + b * d, dwp, d);
}

void check(const Tensor& x, const char* name) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(), "window kernels: ", name, " must be a contiguous CPU tensor");
}

std::tuple<Tensor, Tensor, Tensor> window_forward(const Tensor& WY, const Tensor& q, const Tensor& w,
                                                  const Tensor& values, const Tensor& vis) {
  check(WY, "WY"), check(q, "q"), check(w, "w"), check(values, "values"), check(vis, "vis");
  TORCH_CHECK(vis.scalar_type() == at::kBool, "window kernels: vis must be bool");
  const int64_t B = q.size(0), T = q.size(1), d = q.size(2), L = WY.size(1) - T;
  Tensor r = q.new_empty({B, T, values.size(2)});
  Tensor alpha = q.new_empty({B, T, L});
  Tensor M = q.new_empty({B, T, L, d});
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "window_forward", [&] {
    forward_impl<scalar_t>(WY, q, w, values, vis, r, alpha, M);
  });
  return {r, alpha, M};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> window_backward(const Tensor& dr, const Tensor& M, const Tensor& alpha,
                                                           const Tensor& w, const Tensor& values) {
  check(dr, "dr"), check(M, "M"), check(alpha, "alpha"), check(w, "w"), check(values, "values");
  const int64_t B = alpha.size(0), T = alpha.size(1), L = alpha.size(2), d = M.size(3);
  Tensor dWY = M.new_zeros({B, L + T, d});
  Tensor dq = M.new_zeros({B, T, d});
  Tensor dw = M.new_zeros({d});
  Tensor dvalues = at::zeros_like(values);
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(M.scalar_type(), "window_backward", [&] {
    backward_impl<scalar_t>(dr, M, alpha, w, values, dWY, dq, dw, dvalues);
  });
  return {dWY, dq, dw, dvalues};
}

}  // namespace

TORCH_LIBRARY(memread_window, m) {
  m.def("forward(Tensor WY, Tensor q, Tensor w, Tensor values, Tensor vis) -> (Tensor, Tensor, Tensor)");
  m.def("backward(Tensor dr, Tensor M, Tensor alpha, Tensor w, Tensor values) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(memread_window, CPU, m) {
  m.impl("forward", &window_forward);
  m.impl("backward", &window_backward);
}
