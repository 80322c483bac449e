// The LSTMN recurrence (equations (4)-(9) of Cheng et al. 2016) for one layer over a segment, forward
// and backward, on the CPU: the per-step loops of ``_lstmn_layer_forward`` and
// ``_LSTMNLayerFunction.backward`` in lstmn.py, same buffers, same equations, same order of steps.
// The attention passes over the window (scores, softmax, summaries and their gradients) and the gates
// run as plain loops over each row that the compiler vectorises; the matmuls go to ATen. The Python
// side allocates every buffer and does everything outside the time loop; see _lstmn_kernels.py.
// With ``tape_start = "zero_slot"`` (the buffer s0 is given) every token's softmax has one more entry, the
// zero slot h_0 = c_0 = 0 with key W_h 0 = 0: score v . tanh(q_t), weight s0[t], value 0 (nothing to add to
// the summaries); its score's gradient da_0 = -s_0 sum_i s_i ds_i reaches d q_t and dv only.
//
// Threads: the rows of a batch never interact, so the batch is split into blocks of rows between
// torch's intra-op threads (at::parallel_for; the extension is built with -fopenmp, as torch's own
// OpenMP backend needs) and each thread runs the whole time loop over its block, the step's matmuls
// included (on the block's rows, single-threaded inside the parallel region): no synchronisation per
// step. Each block has its own scratch, every write goes to its own rows, and the one sum over rows,
// dv, is kept per row and added up in row order after the loop, so the results do not depend on the
// number of threads (up to the matmul library's summation order for a different number of rows).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "simd_math.h"

namespace {

using at::Tensor;
using namespace memread_simd;

// slots that token t may attend to: [lo, hi) in tape coordinates (carried slots 0 .. S0-1)
inline void window(int64_t t, int64_t S0, int64_t span, int64_t first, int64_t& lo, int64_t& hi) {
  hi = S0 + t;
  lo = span > 0 ? std::max(first, hi - span) : first;
}

// (4): v . tanh(K_i + q_t)
template <typename scalar_t>
inline scalar_t tanh_dot(const scalar_t* __restrict__ v, const scalar_t* __restrict__ key,
                         const scalar_t* __restrict__ q, int64_t A) {
  const int64_t A16 = vector_part<scalar_t>(A);
  scalar_t acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < A16; ++k) acc += v[k] * tanh_k(key[k] + q[k]);
  if (A16 < A) {
    scalar_t u[16];
    tanh_tail(key + A16, q + A16, scalar_t(1), A - A16, u);
    for (int64_t k = A16; k < A; ++k) acc += v[k] * u[k - A16];
  }
  return acc;
}

// the backward pass of (4) for one slot: with u = tanh(K_i + q_t) and g = da (1 - u^2),
// dK_i += g, dq += g, dv += da u
template <typename scalar_t>
inline void tanh_dot_backward(const scalar_t* __restrict__ key, const scalar_t* __restrict__ q, scalar_t da,
                              scalar_t* __restrict__ dKi, scalar_t* __restrict__ dq, scalar_t* __restrict__ dv,
                              int64_t A) {
  const int64_t A16 = vector_part<scalar_t>(A);
#pragma omp simd
  for (int64_t k = 0; k < A16; ++k) {
    const scalar_t u = tanh_k(key[k] + q[k]);
    const scalar_t g = da * (1 - u * u);  // tanh' = 1 - u^2
    dKi[k] += g;
    dq[k] += g;
    dv[k] += da * u;
  }
  if (A16 < A) {
    scalar_t u[16];
    tanh_tail(key + A16, q + A16, scalar_t(1), A - A16, u);
    for (int64_t k = A16; k < A; ++k) {
      const scalar_t g = da * (1 - u[k - A16] * u[k - A16]);
      dKi[k] += g;
      dq[k] += g;
      dv[k] += da * u[k - A16];
    }
  }
}

// rows per block for at::parallel_for over the batch (one block per thread when the batch allows): a
// step's work per row is small (a window of slots), so a batch of fewer than 8 rows stays on one thread
inline int64_t row_grain(int64_t B) { return B >= 8 ? 4 : B; }

// (B, n) view of row t of a (B, T, X) contiguous buffer, columns [c0, c0 + n)
inline Tensor step_view(const Tensor& buf, int64_t t, int64_t c0, int64_t n) {
  return buf.select(1, t).narrow(1, c0, n);
}

template <typename scalar_t>
void forward_impl(const Tensor& proj, Tensor& HC, Tensor& K, Tensor& s_all, Tensor& q_all, Tensor& hc_tilde,
                  Tensor& gates, const Tensor& q_rec0, const Tensor& W_fT, const Tensor& b_f, const Tensor& W_hT,
                  const Tensor& v, const int64_t* start, int64_t first, int64_t S0, int64_t span, scalar_t* s0p) {
  const int64_t B = proj.size(0), T = proj.size(1), Hd = HC.size(2) / 2, A = v.numel();
  const int64_t S = HC.size(1), P = proj.size(2), H2 = 2 * Hd, H4 = 4 * Hd;
  const scalar_t* pp = proj.data_ptr<scalar_t>();
  scalar_t* hc = HC.data_ptr<scalar_t>();
  scalar_t* kp = K.data_ptr<scalar_t>();
  scalar_t* sp = s_all.data_ptr<scalar_t>();
  scalar_t* qp = q_all.data_ptr<scalar_t>();
  scalar_t* htp = hc_tilde.data_ptr<scalar_t>();
  scalar_t* gp = gates.data_ptr<scalar_t>();
  const scalar_t* vp = v.data_ptr<scalar_t>();
  const scalar_t* bp = b_f.data_ptr<scalar_t>();
  Tensor z = proj.new_empty({B, H4 + A});  // h~_t W_f^T: gates' recurrent part | W_h~ h~_t
  Tensor x_b = proj.new_empty({B, H4});  // W_gx x_t + b, one row at a time
  scalar_t* zp = z.data_ptr<scalar_t>();
  scalar_t* xbp = x_b.data_ptr<scalar_t>();
  const std::vector<scalar_t> zero(Hd, scalar_t(0));
  const std::vector<scalar_t> zero_key(A, scalar_t(0));  // W_h h_0 = 0: the zero slot's key
  // Rows never interact, so each thread runs the whole time loop over its own block of rows (the
  // matmuls of a step on that block's rows): no synchronisation between steps.
  at::parallel_for(0, B, row_grain(B), [&](int64_t b0, int64_t b1) {
    at::NoGradGuard no_grad;  // grad mode is per thread: the weights may require grad
    const int64_t nb = b1 - b0;
    std::vector<scalar_t> a(S);  // this block's scores
    Tensor z_blk = z.narrow(0, b0, nb);
    const scalar_t* q_rec = q_rec0.data_ptr<scalar_t>();  // W_h~ h~_{t-1}: (B, A), row stride q_stride
    int64_t q_stride = A;
    for (int64_t t = 0; t < T; ++t) {
      int64_t lo, hi;
      window(t, S0, span, first, lo, hi);
      for (int64_t b = b0; b < b1; ++b) {
        {  // q_t = W_x x_t + W_h~ h~_{t-1}
          const scalar_t* x = pp + (b * T + t) * P;
          const scalar_t* r = q_rec + b * q_stride;
          scalar_t* q = qp + (b * T + t) * A;
#pragma omp simd
          for (int64_t k = 0; k < A; ++k) q[k] = x[k] + r[k];
        }
        scalar_t* ht = htp + (b * T + t) * H2;
        std::fill_n(ht, H2, scalar_t(0));
        const int64_t lo_b = start ? std::max(lo, start[b]) : lo;
        if (lo_b >= hi) {  // no real slot (or an empty window): h~_t = c~_t = 0
          if (s0p) s0p[b * T + t] = scalar_t(1);  // all the weight on the zero slot, whose value is 0
          continue;
        }
        const scalar_t* __restrict__ q = qp + (b * T + t) * A;
        scalar_t m = -INFINITY, a0 = 0;
        if (s0p) m = a0 = tanh_dot(vp, zero_key.data(), q, A);  // the zero slot: v . tanh(0 + q_t)
        for (int64_t i = lo_b; i < hi; ++i) {  // (4)  a_i = v . tanh(K_i + q_t)
          const scalar_t acc = tanh_dot(vp, kp + (b * S + i) * A, q, A);
          a[i] = acc;
          m = std::max(m, acc);
        }
        scalar_t total = s0p ? (a0 = std::exp(a0 - m)) : scalar_t(0);
        for (int64_t i = lo_b; i < hi; ++i) total += (a[i] = std::exp(a[i] - m));  // (5)
        scalar_t* s = sp + (b * T + t) * S;
        for (int64_t i = lo_b; i < hi; ++i) s[i] = a[i] / total;
        if (s0p) s0p[b * T + t] = a0 / total;
        weighted_sum(s + lo_b, hc + (b * S + lo_b) * H2, hi - lo_b, H2, ht, H2);  // (6)  [h~_t | c~_t]
      }
      at::mm_out(z_blk, step_view(hc_tilde, t, 0, Hd).narrow(0, b0, nb), W_fT);
      for (int64_t b = b0; b < b1; ++b) {
        const scalar_t* __restrict__ x = pp + (b * T + t) * P + A;
        const scalar_t* __restrict__ zb = zp + b * (H4 + A);
        scalar_t* __restrict__ xb = xbp + b * H4;
        scalar_t* __restrict__ g = gp + (b * T + t) * H4;
#pragma omp simd
        for (int64_t j = 0; j < H4; ++j) xb[j] = x[j] + bp[j];
        x = xb;
        // (7): i, f, o = sigmoid(x + z) = (1 + tanh((x + z) / 2)) / 2, c^ = tanh(x + z)
        tanh_sum(x, zb, scalar_t(0.5), g, 3 * Hd);
#pragma omp simd
        for (int64_t j = 0; j < 3 * Hd; ++j) g[j] = scalar_t(0.5) + scalar_t(0.5) * g[j];
        tanh_sum(x + 3 * Hd, zb + 3 * Hd, scalar_t(1), g + 3 * Hd, Hd);
        const scalar_t* __restrict__ c_tilde = htp + (b * T + t) * H2 + Hd;
        scalar_t* __restrict__ h = hc + (b * S + S0 + t) * H2;
        scalar_t* __restrict__ c = h + Hd;
#pragma omp simd
        for (int64_t k = 0; k < Hd; ++k) c[k] = g[Hd + k] * c_tilde[k] + g[k] * g[3 * Hd + k];  // (8)
        tanh_sum(c, zero.data(), scalar_t(1), h, Hd);
#pragma omp simd
        for (int64_t k = 0; k < Hd; ++k) h[k] *= g[2 * Hd + k];  // (9)
      }
      Tensor K_t = K.select(1, S0 + t).narrow(0, b0, nb);
      at::mm_out(K_t, HC.select(1, S0 + t).narrow(1, 0, Hd).narrow(0, b0, nb), W_hT);  // W_h h_t, kept
      q_rec = zp + H4;
      q_stride = H4 + A;
    }
  });
}

template <typename scalar_t>
void backward_impl(const Tensor& grad_h, const Tensor& grad_c, const Tensor& grad_h_tilde, const Tensor& HC,
                   const Tensor& K, const Tensor& q_all, const Tensor& s_all, const Tensor& hc_tilde,
                   const Tensor& gates, const Tensor& W_f,
                   const Tensor& W_hv, const Tensor& v, const int64_t* start, int64_t first, int64_t S0,
                   int64_t span, Tensor& dproj, Tensor& D, Tensor& dK, Tensor& dv, const scalar_t* s0p) {
  const int64_t B = gates.size(0), T = gates.size(1), Hd = gates.size(2) / 4, A = v.numel();
  const int64_t S = HC.size(1), P = A + 4 * Hd, H2 = 2 * Hd, H4 = 4 * Hd;
  const scalar_t* hc = HC.data_ptr<scalar_t>();
  const scalar_t* kp = K.data_ptr<scalar_t>();
  const scalar_t* qp = q_all.data_ptr<scalar_t>();
  const scalar_t* sp = s_all.data_ptr<scalar_t>();
  const scalar_t* gp = gates.data_ptr<scalar_t>();
  const scalar_t* htp = hc_tilde.data_ptr<scalar_t>();
  const scalar_t* vp = v.data_ptr<scalar_t>();
  const scalar_t* gcp = grad_c.defined() ? grad_c.data_ptr<scalar_t>() : nullptr;  // (B, T, H)
  const scalar_t* ghp = grad_h.defined() ? grad_h.data_ptr<scalar_t>() : nullptr;  // (B, T, H)
  scalar_t* dpp = dproj.data_ptr<scalar_t>();
  scalar_t* Dp = D.data_ptr<scalar_t>();
  scalar_t* dKp = dK.data_ptr<scalar_t>();
  scalar_t* dvp = dv.data_ptr<scalar_t>();
  // dv per row, summed over the rows in order after the loop: no shared accumulator between threads
  std::vector<scalar_t> dv_rows(B * A, scalar_t(0));
  const Tensor W_g = W_f.narrow(0, 0, H4);
  Tensor dh = HC.new_empty({B, Hd});
  scalar_t* dhp = dh.data_ptr<scalar_t>();
  const std::vector<scalar_t> zero(Hd, scalar_t(0));
  const std::vector<scalar_t> zero_key(A, scalar_t(0));  // the zero slot's key W_h 0
  // as in the forward pass, each thread runs the whole (reversed) time loop over its block of rows
  at::parallel_for(0, B, row_grain(B), [&](int64_t b0, int64_t b1) {
    at::NoGradGuard no_grad;  // grad mode is per thread: the weights may require grad
    const int64_t nb = b1 - b0;
    std::vector<scalar_t> read(H2), s_slot(T), tanh_c(Hd), ds(S), dq(A), dK0(A);  // this block's scratch
    Tensor dh_blk = dh.narrow(0, b0, nb);
    for (int64_t t = T - 1; t >= 0; --t) {
      const int64_t slot = S0 + t;
      // d h_t: through its key (4), from outside and through the summaries of later tokens (6) below
      at::mm_out(dh_blk, dK.select(1, slot).narrow(0, b0, nb), W_hv);
      const int64_t end = span == 0 ? T : std::min(T, t + 1 + span);  // later tokens that can see this slot
      for (int64_t b = b0; b < b1; ++b) {
        std::fill(read.begin(), read.end(), scalar_t(0));
        for (int64_t r = t + 1; r < end; ++r) s_slot[r - t - 1] = sp[(b * T + r) * S + slot];  // who read it
        weighted_sum(s_slot.data(), Dp + (b * T + t + 1) * H2, end - t - 1, H2, read.data(), H2);
        // (9), (8), (7) with the gates' local derivatives
        scalar_t* __restrict__ dhb = dhp + b * Hd;
        const scalar_t* __restrict__ gc = gcp ? gcp + (b * T + t) * Hd : nullptr;
        const scalar_t* __restrict__ gh = ghp ? ghp + (b * T + t) * Hd : nullptr;
        const scalar_t* __restrict__ g = gp + (b * T + t) * H4;
        const scalar_t* __restrict__ c = hc + (b * S + slot) * H2 + Hd;
        const scalar_t* __restrict__ c_tilde = htp + (b * T + t) * H2 + Hd;
        scalar_t* __restrict__ dg = dpp + (b * T + t) * P + A;
        scalar_t* __restrict__ dct = Dp + (b * T + t) * H2 + Hd;
        const scalar_t* __restrict__ rd = read.data();
        scalar_t* __restrict__ tcb = tanh_c.data();
        tanh_sum(c, zero.data(), scalar_t(1), tcb, Hd);
#pragma omp simd
        for (int64_t k = 0; k < Hd; ++k) {
          const scalar_t i_t = g[k], f_t = g[Hd + k], o_t = g[2 * Hd + k], c_hat = g[3 * Hd + k];
          const scalar_t tc = tcb[k];
          const scalar_t dh_k = dhb[k] + rd[k] + (gh ? gh[k] : scalar_t(0));
          const scalar_t dc = rd[Hd + k] + (gc ? gc[k] : scalar_t(0)) + dh_k * o_t * (1 - tc * tc);  // (9)
          dhb[k] = dh_k;
          dg[k] = (i_t - i_t * i_t) * c_hat * dc;  // i
          dg[Hd + k] = (f_t - f_t * f_t) * c_tilde[k] * dc;  // f
          dg[2 * Hd + k] = (o_t - o_t * o_t) * tc * dh_k;  // o
          dg[3 * Hd + k] = (1 - c_hat * c_hat) * i_t * dc;  // c^
          dct[k] = dc * f_t;  // d c~_t  (8)
        }
      }
      // d h~_t = d gates_t W_g + d q_{t+1} W_h~ (W_h~ h~_t was token t+1's query): one product with W_f, as
      // [d gates_t | d q_{t+1}] lie side by side in dproj (row t, then row t+1 of the same sequence)
      Tensor d_h_tilde = step_view(D, t, 0, Hd).narrow(0, b0, nb);
      const bool last = t + 1 == T;
      const Tensor lhs = last ? step_view(dproj, t, A, H4).narrow(0, b0, nb)
                              : dproj.as_strided({nb, H4 + A}, {T * P, 1},
                                                 dproj.storage_offset() + b0 * T * P + t * P + A);
      const Tensor& W = last ? W_g : W_f;
      if (grad_h_tilde.defined()) at::addmm_out(d_h_tilde, grad_h_tilde.select(1, t).narrow(0, b0, nb), lhs, W);
      else at::mm_out(d_h_tilde, lhs, W);
      int64_t lo, hi;
      window(t, S0, span, first, lo, hi);
      for (int64_t b = b0; b < b1; ++b) {
        std::fill_n(dpp + (b * T + t) * P, A, scalar_t(0));
        const int64_t lo_b = start ? std::max(lo, start[b]) : lo;
        if (lo_b >= hi) continue;  // no real slot (or an empty window)
        const scalar_t* s = sp + (b * T + t) * S;
        const scalar_t* Dt = Dp + (b * T + t) * H2;
        const scalar_t* __restrict__ q = qp + (b * T + t) * A;
        scalar_t sds = 0;
        for (int64_t i = lo_b; i < hi; ++i) {  // (6)  d s_i = D_t . [h_i | c_i]
          const scalar_t acc = dot(Dt, hc + (b * S + i) * H2, H2);
          ds[i] = acc;
          sds += s[i] * acc;
        }
        std::fill(dq.begin(), dq.end(), scalar_t(0));
        for (int64_t i = lo_b; i < hi; ++i) {
          const scalar_t da = s[i] * (ds[i] - sds);  // (5)
          tanh_dot_backward(kp + (b * S + i) * A, q, da, dKp + (b * S + i) * A, dq.data(), dv_rows.data() + b * A,
                            A);  // (4)
        }
        if (s0p) {  // the zero slot (its ds_0 = 0): da_0 = -s_0 sum_i s_i ds_i; its key is a constant (dK0 unused)
          tanh_dot_backward(zero_key.data(), q, -s0p[b * T + t] * sds, dK0.data(), dq.data(), dv_rows.data() + b * A,
                            A);
        }
        scalar_t* dqt = dpp + (b * T + t) * P;  // d q_t
#pragma omp simd
        for (int64_t k = 0; k < A; ++k) dqt[k] = dq[k] * vp[k];
      }
    }
  });
  for (int64_t b = 0; b < B; ++b) axpy(scalar_t(1), dv_rows.data() + b * A, dvp, A);
}

void check(const Tensor& x, const char* name) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(), "lstmn kernels: ", name, " must be a contiguous CPU tensor");
}

// Fills HC[:, S0:], K[:, S0:], s_all, q_all, hc_tilde and gates.
void lstmn_forward(const Tensor& proj, Tensor HC, Tensor K, Tensor s_all, Tensor q_all, Tensor hc_tilde,
                   Tensor gates, const Tensor& q_rec0, const Tensor& W_fT, const Tensor& b_f, const Tensor& W_hT,
                   const Tensor& v, const std::optional<Tensor>& start, int64_t first, int64_t S0, int64_t span,
                   const std::optional<Tensor>& s0) {
  for (const Tensor* x : std::initializer_list<const Tensor*>{&proj, &HC, &K, &s_all, &q_all, &hc_tilde, &gates,
                                                              &q_rec0, &b_f, &v})
    check(*x, "buffer");
  const Tensor st = start.has_value() ? start->contiguous() : Tensor();
  const int64_t* sp = st.defined() ? st.data_ptr<int64_t>() : nullptr;
  if (s0.has_value()) check(*s0, "s0");
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(proj.scalar_type(), "lstmn_forward", [&] {
    scalar_t* s0p = s0.has_value() ? s0->data_ptr<scalar_t>() : nullptr;  // (B, T), written
    forward_impl<scalar_t>(proj, HC, K, s_all, q_all, hc_tilde, gates, q_rec0, W_fT, b_f, W_hT, v, sp, first, S0,
                           span, s0p);
  });
}

// Fills dproj, D, dK, dv (dK and dv zero on entry).
void lstmn_backward(const std::optional<Tensor>& grad_h, const std::optional<Tensor>& grad_c,
                    const std::optional<Tensor>& grad_h_tilde, const Tensor& HC, const Tensor& K,
                    const Tensor& q_all, const Tensor& s_all, const Tensor& hc_tilde, const Tensor& gates,
                    const Tensor& W_f, const Tensor& W_hv,
                    const Tensor& v, const std::optional<Tensor>& start, int64_t first, int64_t S0, int64_t span,
                    Tensor dproj, Tensor D, Tensor dK, Tensor dv, const std::optional<Tensor>& s0) {
  for (const Tensor* x : std::initializer_list<const Tensor*>{&HC, &K, &q_all, &s_all, &hc_tilde, &gates, &v, &dproj,
                                                              &D, &dK, &dv})
    check(*x, "buffer");
  const Tensor gh = grad_h.has_value() ? grad_h->contiguous() : Tensor();
  const Tensor gc = grad_c.has_value() ? grad_c->contiguous() : Tensor();
  const Tensor ght = grad_h_tilde.has_value() ? grad_h_tilde->contiguous() : Tensor();
  const Tensor st = start.has_value() ? start->contiguous() : Tensor();
  const int64_t* sp = st.defined() ? st.data_ptr<int64_t>() : nullptr;
  const Tensor s0c = s0.has_value() ? s0->contiguous() : Tensor();
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(HC.scalar_type(), "lstmn_backward", [&] {
    const scalar_t* s0p = s0c.defined() ? s0c.data_ptr<scalar_t>() : nullptr;
    backward_impl<scalar_t>(gh, gc, ght, HC, K, q_all, s_all, hc_tilde, gates, W_f, W_hv, v, sp, first,
                            S0, span, dproj, D, dK, dv, s0p);
  });
}

}  // namespace

TORCH_LIBRARY(memread_lstmn, m) {
  m.def("forward(Tensor proj, Tensor(a!) HC, Tensor(b!) K, Tensor(c!) s_all, Tensor(d!) q_all, "
        "Tensor(e!) hc_tilde, Tensor(f!) gates, Tensor q_rec0, Tensor W_fT, Tensor b_f, Tensor W_hT, Tensor v, "
        "Tensor? start, int first, int S0, int span, Tensor(g!)? s0=None) -> ()");
  m.def("backward(Tensor? grad_h, Tensor? grad_c, Tensor? grad_h_tilde, Tensor HC, Tensor K, Tensor q_all, "
        "Tensor s_all, Tensor hc_tilde, Tensor gates, Tensor W_f, Tensor W_hv, Tensor v, "
        "Tensor? start, int first, int S0, int span, Tensor(a!) dproj, Tensor(b!) D, Tensor(c!) dK, "
        "Tensor(d!) dv, Tensor? s0=None) -> ()");
}

TORCH_LIBRARY_IMPL(memread_lstmn, CPU, m) {
  m.impl("forward", &lstmn_forward);
  m.impl("backward", &lstmn_backward);
}
