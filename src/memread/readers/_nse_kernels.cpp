// The NSE / MMA-NSE time loop (equations (2)-(6) and (10)-(15) of Munkhdalai & Yu 2016), forward and
// backward, on the CPU: the per-step loops of ``_NSELoop`` in nse.py, same equations, same order of
// steps, with no Python per step. Per step and row, the memory passes (scores, masked softmax, the read,
// the erase/write, and their backward) are plain loops over the row's slots that the compiler
// vectorises; the products with the weights (the compose part W_c^m [reads], the write LSTM's gates) go
// to ATen, one matmul per step on a block of rows. The Python side allocates every buffer, computes the
// weight gradients (one matmul each over all steps) and does everything outside the time loop; see
// _nse_kernels.py.
//
// Buffers (time-major, so that a step's rows are contiguous):
//   o (B, T, k), c_o (B, T, N), keep (B, T, N) or undefined, live (B, T) bool: a real step (the NSE
//   reader passes its own memory's mask, the NSE decoder its target mask);
//   memories j = 0 .. J-1 (the NSE reader's own one first, then the shared ones; the NSE decoder has only
//   the shared one, the encoder's memory), each as ``steps`` tensors (B, S_j, k),
//   listed memory by memory (mem[j * steps + t]), step 0 given; with ``store`` (steps = T + 1) step t + 1
//   is M_{t+1} (every memory is kept for the backward pass), without it (steps = 1) the one buffer is
//   updated in place; masks[j] (B, S_j) bool: the real slots;
//   z[j] (T, B, S_j): the keys; reads (T, B, J k): [m_{r,t}; m_{r,t}^1 ..];
//   per write layer l, X[l] (T, B, in_l + k) = [its input at t | h^l_{t-1}] (in_0 = N: c_t after dropout),
//   so that the gates are one matmul with W_cat^l = [W_ih W_hh]; G (L, T, B, 4k): the activated gates
//   (torch's order i, f, g, o); C (L, T + 1, B, k): the cells, C[l, 0] = 0; H (T, B, k): the top layer's h_t.
// At a padded step (live = 0) the keys are 0: nothing is read or written (the write LSTM still runs, as
// in the Python loop); a memory row without a real slot gets zero keys too (as masked_softmax does).
//
// Threads: rows never interact, so the batch is split into blocks of rows between torch's intra-op
// threads (at::parallel_for) and each thread runs the whole time loop over its block, its matmuls
// included (single-threaded inside the parallel region): no synchronisation per step. Every write goes
// to the block's own rows and there is no sum over rows here (the weight gradients are summed in Python
// afterwards), so the results do not depend on the number of threads (up to the matmul library's
// summation order for a different number of rows).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "simd_math.h"

namespace {

using at::Tensor;
using namespace memread_simd;

// rows per block for at::parallel_for over the batch: fewer than 8 rows stay on one thread
inline int64_t row_grain(int64_t B) { return B >= 8 ? 4 : B; }

// x_k = tanh(c x_k) for k < n, in place
template <typename scalar_t>
inline void tanh_inplace(scalar_t* x, scalar_t c, int64_t n) {
  const int64_t n16 = vector_part<scalar_t>(n);
#pragma omp simd
  for (int64_t k = 0; k < n16; ++k) x[k] = tanh_k(c * x[k]);
  if (n16 < n) {
    const scalar_t zero[16] = {};
    tanh_tail(x + n16, zero, c, n - n16, x + n16);  // reads its inputs before it writes
  }
}

// (B, cols) view of step t of a time-major (T, B, X) buffer, rows [b0, b0 + nb), columns [c0, c0 + cols)
inline Tensor block(const Tensor& buf, int64_t t, int64_t b0, int64_t nb, int64_t c0, int64_t cols) {
  return buf.select(0, t).narrow(0, b0, nb).narrow(1, c0, cols);
}

struct Memory {
  int64_t S;  // slots
  const bool* mask;  // (B, S)
};

// (2)-(3) for one row and memory: z = masked softmax(M o) (0 at a padded step or without a real slot),
// read = z^T M
template <typename scalar_t>
inline void keys_and_read(const scalar_t* __restrict__ M, const scalar_t* __restrict__ o, const bool* mask,
                          bool live, int64_t S, int64_t k, scalar_t* __restrict__ z, scalar_t* __restrict__ read) {
  std::fill_n(read, k, scalar_t(0));
  std::fill_n(z, S, scalar_t(0));
  if (!live) return;
  scalar_t m = -INFINITY;
  bool any = false;
  for (int64_t i = 0; i < S; ++i) {
    if (!mask[i]) continue;
    const scalar_t a = dot(M + i * k, o, k);
    z[i] = a;
    m = std::max(m, a);
    any = true;
  }
  if (!any) return;
  scalar_t total = 0;
  for (int64_t i = 0; i < S; ++i)
    if (mask[i]) total += (z[i] = std::exp(z[i] - m));
  for (int64_t i = 0; i < S; ++i)
    if (mask[i]) z[i] /= total;
  for (int64_t i = 0; i < S; ++i)
    if (z[i] != scalar_t(0)) axpy(z[i], M + i * k, read, k);
}

// (6): M_next = M (1 - z) + z h^T row by row; M_next may be M (then the slots with z_i = 0 are left alone)
template <typename scalar_t>
inline void erase_write(const scalar_t* M, const scalar_t* __restrict__ z, const scalar_t* __restrict__ h,
                        int64_t S, int64_t k, scalar_t* M_next) {
  for (int64_t i = 0; i < S; ++i) {
    const scalar_t* src = M + i * k;
    scalar_t* dst = M_next + i * k;
    const scalar_t zi = z[i];
    if (zi == scalar_t(0)) {
      if (dst != src) std::memcpy(dst, src, k * sizeof(scalar_t));
      continue;
    }
    const scalar_t keep = 1 - zi;
#pragma omp simd
    for (int64_t c = 0; c < k; ++c) dst[c] = src[c] * keep + zi * h[c];
  }
}

template <typename scalar_t>
void forward_impl(const Tensor& o, const Tensor& c_o, const Tensor& keep, const bool* live,
                  const std::vector<Memory>& memories, at::TensorList mem, at::TensorList z, const Tensor& reads,
                  at::TensorList X, const Tensor& G, const Tensor& C, const Tensor& H, const Tensor& W_cmT,
                  at::TensorList W_catT, at::TensorList bias, bool store) {
  const int64_t B = o.size(0), T = o.size(1), k = o.size(2), N = c_o.size(2);
  const int64_t J = static_cast<int64_t>(memories.size()), L = static_cast<int64_t>(X.size()), R = J * k;
  const scalar_t* op = o.data_ptr<scalar_t>();
  const scalar_t* cop = c_o.data_ptr<scalar_t>();
  const scalar_t* kp = keep.defined() ? keep.data_ptr<scalar_t>() : nullptr;
  scalar_t* rp = reads.data_ptr<scalar_t>();
  scalar_t* gp = G.data_ptr<scalar_t>();
  scalar_t* cp = C.data_ptr<scalar_t>();
  scalar_t* hp = H.data_ptr<scalar_t>();
  const int64_t steps = static_cast<int64_t>(mem.size()) / J;
  std::vector<scalar_t*> mp(J * steps), zp(J), xp(L);  // mp[j * steps + t]: M^j_t
  std::vector<int64_t> in(L);
  for (int64_t j = 0; j < J; ++j) zp[j] = z[j].data_ptr<scalar_t>();
  for (size_t i = 0; i < mem.size(); ++i) mp[i] = mem[i].data_ptr<scalar_t>();
  for (int64_t l = 0; l < L; ++l) {
    xp[l] = X[l].data_ptr<scalar_t>();
    in[l] = X[l].size(2) - k;
  }
  at::parallel_for(0, B, row_grain(B), [&](int64_t b0, int64_t b1) {
    at::NoGradGuard no_grad;  // grad mode is per thread: the weights may require grad
    const int64_t nb = b1 - b0;
    std::vector<scalar_t> tc(k);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t cur = store ? t : 0, nxt = store ? t + 1 : 0;
      for (int64_t b = b0; b < b1; ++b) {  // (2), (3), (10), (11)
        for (int64_t j = 0; j < J; ++j) {
          const int64_t S = memories[j].S;
          keys_and_read(mp[j * steps + cur] + b * S * k, op + (b * T + t) * k, memories[j].mask + b * S,
                        live[b * T + t], S, k, zp[j] + (t * B + b) * S, rp + (t * B + b) * R + j * k);
        }
      }
      // (4), (12): c_t = W_c^m [reads] + (W_c^o o_t + b_c), into the first layer's input; then dropout
      Tensor c_t = block(X[0], t, b0, nb, 0, N);
      at::mm_out(c_t, block(reads, t, b0, nb, 0, R), W_cmT);
      for (int64_t b = b0; b < b1; ++b) {
        scalar_t* __restrict__ x = xp[0] + (t * B + b) * (N + k);
        const scalar_t* __restrict__ c = cop + (b * T + t) * N;
        if (kp) {
          const scalar_t* __restrict__ m = kp + (b * T + t) * N;
#pragma omp simd
          for (int64_t n = 0; n < N; ++n) x[n] = (x[n] + c[n]) * m[n];
        } else {
#pragma omp simd
          for (int64_t n = 0; n < N; ++n) x[n] += c[n];
        }
      }
      for (int64_t l = 0; l < L; ++l) {  // (5), (13)
        const int64_t W = in[l] + k;
        Tensor g_blk = G.select(0, l).select(0, t).narrow(0, b0, nb);
        at::mm_out(g_blk, X[l].select(0, t).narrow(0, b0, nb), W_catT[l]);
        const scalar_t* __restrict__ bl = bias[l].data_ptr<scalar_t>();
        for (int64_t b = b0; b < b1; ++b) {
          scalar_t* __restrict__ g = gp + ((l * T + t) * B + b) * 4 * k;
#pragma omp simd
          for (int64_t c = 0; c < 4 * k; ++c) g[c] += bl[c];
          // i, f, o = sigmoid(x) = (1 + tanh(x / 2)) / 2, g = tanh(x)
          tanh_inplace(g, scalar_t(0.5), 2 * k);
          tanh_inplace(g + 2 * k, scalar_t(1), k);
          tanh_inplace(g + 3 * k, scalar_t(0.5), k);
#pragma omp simd
          for (int64_t c = 0; c < 2 * k; ++c) g[c] = scalar_t(0.5) + scalar_t(0.5) * g[c];
#pragma omp simd
          for (int64_t c = 3 * k; c < 4 * k; ++c) g[c] = scalar_t(0.5) + scalar_t(0.5) * g[c];
          const scalar_t* __restrict__ c_prev = cp + ((l * (T + 1) + t) * B + b) * k;
          scalar_t* __restrict__ c_new = cp + ((l * (T + 1) + t + 1) * B + b) * k;
#pragma omp simd
          for (int64_t c = 0; c < k; ++c) c_new[c] = g[k + c] * c_prev[c] + g[c] * g[2 * k + c];
          scalar_t* __restrict__ tcb = tc.data();
          std::memcpy(tcb, c_new, k * sizeof(scalar_t));
          tanh_inplace(tcb, scalar_t(1), k);
          scalar_t* __restrict__ h = l + 1 < L ? xp[l + 1] + (t * B + b) * (in[l + 1] + k)  // the next layer's input
                                               : hp + (t * B + b) * k;
#pragma omp simd
          for (int64_t c = 0; c < k; ++c) h[c] = g[3 * k + c] * tcb[c];
          if (t + 1 < T) std::memcpy(xp[l] + ((t + 1) * B + b) * W + in[l], h, k * sizeof(scalar_t));  // h^l_t
        }
      }
      for (int64_t b = b0; b < b1; ++b) {  // (6), (15)
        const scalar_t* h = hp + (t * B + b) * k;
        for (int64_t j = 0; j < J; ++j) {
          const int64_t S = memories[j].S;
          erase_write(mp[j * steps + cur] + b * S * k, zp[j] + (t * B + b) * S, h, S, k,
                      mp[j * steps + nxt] + b * S * k);
        }
      }
    }
  });
}

template <typename scalar_t>
void backward_impl(const Tensor& grad_h, const Tensor& o, const Tensor& keep, const std::vector<Memory>& memories,
                   at::TensorList mem, at::TensorList z, at::TensorList X, const Tensor& G, const Tensor& C,
                   const Tensor& H, const Tensor& W_cm, at::TensorList W_cat, const Tensor& dh_T, const Tensor& dc_T,
                   at::TensorList dM, const Tensor& dG, const Tensor& dc_all, const Tensor& d_o, const Tensor& dh_0,
                   const Tensor& dc_0) {
  const int64_t B = o.size(0), T = o.size(1), k = o.size(2), N = dc_all.size(2);
  const int64_t J = static_cast<int64_t>(memories.size()), L = static_cast<int64_t>(X.size()), R = J * k;
  const scalar_t* op = o.data_ptr<scalar_t>();
  const scalar_t* kp = keep.defined() ? keep.data_ptr<scalar_t>() : nullptr;
  const scalar_t* ghp = grad_h.defined() ? grad_h.data_ptr<scalar_t>() : nullptr;  // (B, T, k)
  const scalar_t* gp = G.data_ptr<scalar_t>();
  const scalar_t* cp = C.data_ptr<scalar_t>();
  const scalar_t* hp = H.data_ptr<scalar_t>();
  scalar_t* dgp = dG.data_ptr<scalar_t>();
  scalar_t* dcp = dc_all.data_ptr<scalar_t>();
  scalar_t* dop = d_o.data_ptr<scalar_t>();
  const int64_t steps = static_cast<int64_t>(mem.size()) / J;  // T + 1
  std::vector<const scalar_t*> mp(J * steps), zp(J);
  std::vector<scalar_t*> dmp(J);
  std::vector<int64_t> in(L), zoff(J + 1, 0);
  for (size_t i = 0; i < mem.size(); ++i) mp[i] = mem[i].data_ptr<scalar_t>();
  for (int64_t j = 0; j < J; ++j) {
    zp[j] = z[j].data_ptr<scalar_t>();
    dmp[j] = dM[j].data_ptr<scalar_t>();
    zoff[j + 1] = zoff[j] + memories[j].S;
  }
  for (int64_t l = 0; l < L; ++l) in[l] = X[l].size(2) - k;
  // per layer [d input_t | d h^l_{t-1}] = dG^l_t W_cat^l (its second half is used at step t - 1)
  std::vector<Tensor> DXH(L);
  std::vector<scalar_t*> dxp(L);
  for (int64_t l = 0; l < L; ++l) {
    DXH[l] = o.new_zeros({B, in[l] + k});
    if (dh_T.defined()) DXH[l].narrow(1, in[l], k).copy_(dh_T.select(0, l));  // d h^l_{T-1} from outside
    dxp[l] = DXH[l].data_ptr<scalar_t>();
  }
  Tensor DC = dc_T.defined() ? dc_T.clone() : o.new_zeros({L, B, k});  // d c^l_t from step t + 1 (or outside)
  Tensor DR = o.new_empty({B, R});  // d [m_{r,t}; m_{r,t}^n ..]
  scalar_t* dcrp = DC.data_ptr<scalar_t>();
  scalar_t* drp = DR.data_ptr<scalar_t>();
  std::vector<scalar_t> dz(B * zoff[J]), dh_top(B * k);  // d z_i from the write (then + the read), d h_t
  at::parallel_for(0, B, row_grain(B), [&](int64_t b0, int64_t b1) {
    at::NoGradGuard no_grad;
    const int64_t nb = b1 - b0;
    std::vector<scalar_t> tc(k);
    for (int64_t t = T - 1; t >= 0; --t) {
      for (int64_t b = b0; b < b1; ++b) {
        scalar_t* __restrict__ dh = dh_top.data() + b * k;
        const scalar_t* rec = dxp[L - 1] + b * (in[L - 1] + k) + in[L - 1];  // from step t + 1's W_hh
        const scalar_t* gh = ghp ? ghp + (b * T + t) * k : nullptr;
        for (int64_t c = 0; c < k; ++c) dh[c] = rec[c] + (gh ? gh[c] : scalar_t(0));
        const scalar_t* __restrict__ h = hp + (t * B + b) * k;
        for (int64_t j = 0; j < J; ++j) {  // (6), (15) backward; g: d M_{t+1} -> (partly) d M_t
          const int64_t S = memories[j].S;
          const scalar_t* M = mp[j * steps + t] + b * S * k;
          const scalar_t* zr = zp[j] + (t * B + b) * S;
          scalar_t* g = dmp[j] + b * S * k;
          scalar_t* dzr = dz.data() + b * zoff[J] + zoff[j];
          for (int64_t i = 0; i < S; ++i) {
            const scalar_t zi = zr[i];
            if (zi == scalar_t(0)) {  // not read, not written: its key's gradient is multiplied by 0
              dzr[i] = 0;
              continue;
            }
            scalar_t* __restrict__ gi = g + i * k;
            const scalar_t* __restrict__ Mi = M + i * k;
            const scalar_t keep_i = 1 - zi;
            scalar_t acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < k; ++c) {
              acc += gi[c] * (h[c] - Mi[c]);  // d z_i = dM_i . (h_t - M_i)
              dh[c] += zi * gi[c];  // d h_t += z_i dM_i
              gi[c] *= keep_i;
            }
            dzr[i] = acc;
          }
        }
      }
      for (int64_t l = L - 1; l >= 0; --l) {  // (5), (13) backward
        const int64_t W = in[l] + k;
        for (int64_t b = b0; b < b1; ++b) {
          scalar_t* __restrict__ tcb = tc.data();
          const scalar_t* __restrict__ g = gp + ((l * T + t) * B + b) * 4 * k;
          const scalar_t* __restrict__ c_new = cp + ((l * (T + 1) + t + 1) * B + b) * k;
          const scalar_t* __restrict__ c_prev = cp + ((l * (T + 1) + t) * B + b) * k;
          scalar_t* __restrict__ dcr = dcrp + (l * B + b) * k;
          scalar_t* __restrict__ d = dgp + ((l * T + t) * B + b) * 4 * k;
          const scalar_t* dh_a;  // d h^l_t: from the memories and outside (top), or from the layer above
          const scalar_t* dh_b;  // ... plus from step t + 1 (below the top)
          if (l == L - 1) {
            dh_a = dh_top.data() + b * k;
            dh_b = nullptr;
          } else {
            dh_a = dxp[l + 1] + b * (in[l + 1] + k);
            dh_b = dxp[l] + b * W + in[l];
          }
          std::memcpy(tcb, c_new, k * sizeof(scalar_t));
          tanh_inplace(tcb, scalar_t(1), k);
#pragma omp simd
          for (int64_t c = 0; c < k; ++c) {
            const scalar_t i_t = g[c], f_t = g[k + c], g_t = g[2 * k + c], o_t = g[3 * k + c], tcc = tcb[c];
            const scalar_t dhc = dh_a[c] + (dh_b ? dh_b[c] : scalar_t(0));
            const scalar_t dc = dhc * o_t * (1 - tcc * tcc) + dcr[c];
            d[c] = dc * g_t * i_t * (1 - i_t);
            d[k + c] = dc * c_prev[c] * f_t * (1 - f_t);
            d[2 * k + c] = dc * i_t * (1 - g_t * g_t);
            d[3 * k + c] = dhc * tcc * o_t * (1 - o_t);
            dcr[c] = dc * f_t;
          }
        }
        Tensor dxh = DXH[l].narrow(0, b0, nb);
        at::mm_out(dxh, dG.select(0, l).select(0, t).narrow(0, b0, nb), W_cat[l]);
      }
      for (int64_t b = b0; b < b1; ++b) {  // d c_t (before dropout) = d c_o
        const scalar_t* __restrict__ src = dxp[0] + b * (N + k);
        scalar_t* __restrict__ dst = dcp + (t * B + b) * N;
        if (kp) {
          const scalar_t* __restrict__ m = kp + (b * T + t) * N;
#pragma omp simd
          for (int64_t n = 0; n < N; ++n) dst[n] = src[n] * m[n];
        } else {
          std::memcpy(dst, src, N * sizeof(scalar_t));
        }
      }
      Tensor dr = DR.narrow(0, b0, nb);
      at::mm_out(dr, block(dc_all, t, b0, nb, 0, N), W_cm);
      for (int64_t b = b0; b < b1; ++b) {  // (3), (2) backward, (11), (10)
        const scalar_t* __restrict__ o_t = op + (b * T + t) * k;
        scalar_t* __restrict__ do_t = dop + (t * B + b) * k;
        std::fill_n(do_t, k, scalar_t(0));
        for (int64_t j = 0; j < J; ++j) {
          const int64_t S = memories[j].S;
          const scalar_t* M = mp[j * steps + t] + b * S * k;
          const scalar_t* zr = zp[j] + (t * B + b) * S;
          const scalar_t* __restrict__ dm = drp + b * R + j * k;
          scalar_t* g = dmp[j] + b * S * k;
          scalar_t* dzr = dz.data() + b * zoff[J] + zoff[j];
          scalar_t sdz = 0;
          for (int64_t i = 0; i < S; ++i) {
            if (zr[i] == scalar_t(0)) continue;
            dzr[i] += dot(M + i * k, dm, k);  // (3) m = z^T M
            sdz += zr[i] * dzr[i];
          }
          for (int64_t i = 0; i < S; ++i) {
            const scalar_t zi = zr[i];
            if (zi == scalar_t(0)) continue;
            const scalar_t ds = zi * (dzr[i] - sdz);  // (2) softmax over the real slots
            const scalar_t* __restrict__ Mi = M + i * k;
            scalar_t* __restrict__ gi = g + i * k;
#pragma omp simd
            for (int64_t c = 0; c < k; ++c) {
              do_t[c] += ds * Mi[c];  // s = M o_t
              gi[c] += zi * dm[c] + ds * o_t[c];
            }
          }
        }
      }
    }
  });
  // the gradients of the write LSTM's initial states h^l_{-1}, c^l_{-1}: what step 0 passed back
  for (int64_t l = 0; l < L; ++l)
    if (dh_0.defined()) dh_0.select(0, l).copy_(DXH[l].narrow(1, in[l], k));
  if (dc_0.defined()) dc_0.copy_(DC);
}

void check(const Tensor& x, const char* name) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(), "nse kernels: ", name, " must be a contiguous CPU tensor");
}

std::vector<Memory> memories_of(at::TensorList masks, at::TensorList mem) {
  TORCH_CHECK(!masks.empty() && !mem.empty() && mem.size() % masks.size() == 0,
              "nse kernels: the same number of steps for every memory");
  const size_t steps = mem.size() / masks.size();
  for (const Tensor& x : mem) check(x, "memory");
  std::vector<Memory> out;
  for (size_t j = 0; j < masks.size(); ++j) {
    check(masks[j], "mask");
    TORCH_CHECK(masks[j].scalar_type() == at::kBool, "nse kernels: masks must be bool");
    out.push_back({mem[j * steps].size(1), masks[j].data_ptr<bool>()});
  }
  return out;
}

// Fills mem[j][1:] (or mem[j][0] in place), z, reads, X (X[l][0, :, in_l:] = h^l_{-1} on entry, zero
// to start afresh), G, C (C[:, 0] = c^l_{-1} on entry) and H.
void nse_forward(const Tensor& o, const Tensor& c_o, const std::optional<Tensor>& keep, const Tensor& live,
                 at::TensorList masks, at::TensorList mem, at::TensorList z, const Tensor& reads, at::TensorList X,
                 const Tensor& G, const Tensor& C, const Tensor& H, const Tensor& W_cmT, at::TensorList W_catT,
                 at::TensorList bias, bool store) {
  for (const Tensor* x : {&o, &c_o, &live, &reads, &G, &C, &H}) check(*x, "buffer");
  for (const Tensor& x : z) check(x, "z");
  for (const Tensor& x : X) check(x, "X");
  for (const Tensor& x : bias) check(x, "bias");
  TORCH_CHECK(live.scalar_type() == at::kBool, "nse kernels: live must be bool");
  const Tensor kp = keep.has_value() ? keep->contiguous() : Tensor();
  const std::vector<Memory> memories = memories_of(masks, mem);
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(o.scalar_type(), "nse_forward", [&] {
    forward_impl<scalar_t>(o, c_o, kp, live.data_ptr<bool>(), memories, mem, z, reads, X, G, C, H, W_cmT, W_catT,
                           bias, store);
  });
}

// Fills dM (the gradients of the final memories on entry, of the initial ones on exit), dG, dc_all, d_o.
// dh_T, dc_T (L, B, k), if given: the gradients of the write LSTM's final states, h^l and c^l after the
// last step (C[l, T]; outputs of the NSE decoder), added to those from the outputs H and the memories.
// dh_0, dc_0 (L, B, k), if given, receive the gradients of the initial states h^l_{-1} (X[l][0, :, in_l:])
// and c^l_{-1} (C[l, 0]), for a loop that goes on from a previous segment's states.
void nse_backward(const std::optional<Tensor>& grad_h, const Tensor& o, const std::optional<Tensor>& keep,
                  at::TensorList masks, at::TensorList mem, at::TensorList z, at::TensorList X, const Tensor& G,
                  const Tensor& C, const Tensor& H, const Tensor& W_cm, at::TensorList W_cat,
                  const std::optional<Tensor>& dh_T, const std::optional<Tensor>& dc_T, at::TensorList dM,
                  const Tensor& dG, const Tensor& dc_all, const Tensor& d_o, const std::optional<Tensor>& dh_0,
                  const std::optional<Tensor>& dc_0) {
  for (const Tensor* x : {&o, &G, &C, &H, &dG, &dc_all, &d_o}) check(*x, "buffer");
  for (const Tensor& x : z) check(x, "z");
  for (const Tensor& x : X) check(x, "X");
  for (const Tensor& x : dM) check(x, "dM");
  const Tensor gh = grad_h.has_value() ? grad_h->contiguous() : Tensor();
  const Tensor kp = keep.has_value() ? keep->contiguous() : Tensor();
  const int64_t L = static_cast<int64_t>(X.size()), B = o.size(0), k = o.size(2);
  for (const std::optional<Tensor>* d : {&dh_T, &dc_T, &dh_0, &dc_0})
    if (d->has_value())
      TORCH_CHECK((*d)->dim() == 3 && (*d)->size(0) == L && (*d)->size(1) == B && (*d)->size(2) == k &&
                      (*d)->scalar_type() == o.scalar_type(),
                  "nse kernels: dh_T, dc_T, dh_0 and dc_0 must be (layers, B, k) in o's dtype");
  for (const std::optional<Tensor>* d : {&dh_0, &dc_0})
    if (d->has_value()) check(**d, "dh_0 / dc_0");
  const Tensor dh = dh_T.has_value() ? *dh_T : Tensor(), dc = dc_T.has_value() ? dc_T->contiguous() : Tensor();
  const std::vector<Memory> memories = memories_of(masks, mem);
  at::NoGradGuard no_grad;
  AT_DISPATCH_FLOATING_TYPES(o.scalar_type(), "nse_backward", [&] {
    backward_impl<scalar_t>(gh, o, kp, memories, mem, z, X, G, C, H, W_cm, W_cat, dh, dc, dM, dG, dc_all, d_o,
                            dh_0.has_value() ? *dh_0 : Tensor(), dc_0.has_value() ? *dc_0 : Tensor());
  });
}

}  // namespace

TORCH_LIBRARY(memread_nse, m) {
  m.def("forward(Tensor o, Tensor c_o, Tensor? keep, Tensor live, Tensor[] masks, Tensor(a!)[] mem, "
        "Tensor(b!)[] z, Tensor(c!) reads, Tensor(d!)[] X, Tensor(e!) G, Tensor(f!) C, Tensor(g!) H, "
        "Tensor W_cmT, Tensor[] W_catT, Tensor[] bias, bool store) -> ()");
  m.def("backward(Tensor? grad_h, Tensor o, Tensor? keep, Tensor[] masks, Tensor[] mem, Tensor[] z, Tensor[] X, "
        "Tensor G, Tensor C, Tensor H, Tensor W_cm, Tensor[] W_cat, Tensor? dh_T, Tensor? dc_T, Tensor(a!)[] dM, "
        "Tensor(b!) dG, Tensor(c!) dc_all, Tensor(d!) d_o, Tensor(e!)? dh_0, Tensor(f!)? dc_0) -> ()");
}

TORCH_LIBRARY_IMPL(memread_nse, CPU, m) {
  m.impl("forward", &nse_forward);
  m.impl("backward", &nse_backward);
}
