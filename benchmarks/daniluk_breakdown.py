"""Where the time of the key-value-predict LM goes, against the LSTM LM it matches in size (issue 7).

One process, interleaved, median of repeats, the whole LM step as `memread bench --vocab` times it
(embedding, reader, softmax, cross-entropy, backward), B=64, T=20, w=300, V=10k, L=5:

- ``lstm300``: torch's nn.LSTM LM, hidden 300 (6.73M parameters) - the reference;
- ``kvp_parallel``: memread's kvp reader at the matched size (k = 537), window attention for all
  positions at once;
- ``kvp_stepwise``: the same weights, the attention computed step by step over t (LSTM still fused),
  as public implementations do;
- ``lstm537_alone``: only the kvp's LSTM (k = 537) with the softmax reading 179 of its outputs: no
  attention at all, the ceiling any kvp implementation on torch's fused LSTM can reach;
- ``kvp_products_only``: the kvp's LSTM and the four d x d products its equations need (W^Y on every
  slot's key, W^h on the query, W^r and W^x), joined by sums, without the window arithmetic (no
  tanh over (t, j) pairs, no softmax, no weighted sum): what is left when the attention itself is free;
- ``ngram_matched``: memread's 4-gram RNN at its matched size (k = 540), for comparison in the same
  process (its own `memread bench ngram --match-params` runs in a process of its own);
- ``lstm537_parts``: that LSTM's forward and backward alone (torch's fused nn.LSTM, oneDNN on CPU)
  against the bare matrix products any implementation of it must do (input projection for all steps,
  T recurrent products forward and T backward, the two weight gradients and the input gradient, each
  as one call; no gate nonlinearities at all), in milliseconds: how far a hand-written LSTM could
  at best move the ceiling.

    OMP_NUM_THREADS=1 python benchmarks/daniluk_breakdown.py [--repeats 30] [--ceiling]

Prints one JSON line: tokens/s and ratio against ``lstm300`` of each, and ``kvp_of_ceiling``, the kvp's
ratio over the ceiling's, which is also the line's ``ratio`` (the suite's ``kvp-of-ceiling`` check).
**The ceiling is ``kvp_products_only``**: an implementation of the kvp's equations must do its LSTM and
its four d x d products; only the window arithmetic could in principle be free. ``lstm537_alone`` is not
a ceiling of any kvp (it leaves the products out); it is shown for where the rest of the time goes.
``--ceiling`` times only the four models this needs (and not ``lstm537_parts``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch import nn

from memread.bench.readers import _LSTMReference, _Step
from memread.modules.document_lstm import DocumentLSTM
from memread.readers import build_reader
from memread.readers.key_value_predict import KeyValuePredictConfig
from memread.readers.ngram_rnn import NGramRNNConfig

B, T, E, V, K, L = 64, 20, 300, 10_000, 537, 5


class _OnKVPWeights(nn.Module):
    """Another computation on the weights of a kvp reader ``fast`` (its forward is the variant's)."""

    def __init__(self, fast):
        super().__init__()
        self.fast, self.output_size = fast, fast.output_size


class StepwiseKVP(_OnKVPWeights):
    """The kvp reader's weights, attention over the window one time step at a time."""

    def forward(self, x, mask=None, state=None, return_attention=False):
        f, A = self.fast, self.fast.attention
        h, _ = f.lstm(x)
        k, v, p = h.split(f.d, dim=-1)
        keys, values, out = [], [], []
        for t in range(x.size(1)):
            if keys:
                Y, Vy = torch.stack(keys[-L:], 1), torch.stack(values[-L:], 1)  # (B, m, d)
                M = torch.tanh(A.W_Y(Y) + A.W_h(k[:, t]).unsqueeze(1))
                a = torch.softmax(A.w(M).squeeze(-1), dim=-1)
                r = (a.unsqueeze(-1) * Vy).sum(1)
            else:
                r = torch.zeros_like(v[:, t])
            out.append(torch.tanh(f.W_r(r) + f.W_x(p[:, t])))
            keys.append(k[:, t])
            values.append(v[:, t])
        return torch.stack(out, 1)


class LSTMAlone(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm, self.output_size = DocumentLSTM(E, K), K // 3

    def forward(self, x, mask=None, state=None, return_attention=False):
        return self.lstm(x)[0][..., : self.output_size]


def _median_ms(fn, repeats: int) -> float:
    fn(), fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def lstm537_parts(repeats: int = 30) -> dict:
    lstm = nn.LSTM(E, K, batch_first=True)
    x = torch.randn(B, T, E, requires_grad=True)

    def fused():
        out, _ = lstm(x)
        out.sum().backward()

    X, H, h = torch.randn(B * T, E), torch.randn(B * T, K), torch.randn(B, K)
    W_ih, W_hh, dG = torch.randn(4 * K, E), torch.randn(4 * K, K), torch.randn(B * T, 4 * K)
    gates = torch.empty(B * T, 4 * K)

    def gemms():
        torch.mm(X, W_ih.t(), out=gates)  # forward: the input part of every step's gates, one call
        g = gates.view(B, T, 4 * K)
        for t in range(T):
            g[:, t].addmm_(h, W_hh.t())  # forward: the recurrent part, step by step
        for t in range(T):
            torch.mm(dG[t * B : (t + 1) * B], W_hh)  # backward: dh_{t-1}, step by step
        torch.mm(dG.t(), H), torch.mm(dG.t(), X), torch.mm(dG, W_ih)  # dW_hh, dW_ih, dx: one call each

    return {"fused_ms": round(_median_ms(fused, repeats), 2), "gemm_ms": round(_median_ms(gemms, repeats), 2)}


class KVPProductsOnly(_OnKVPWeights):
    """The kvp's LSTM and its four d x d products, joined by sums: no window arithmetic."""

    def forward(self, x, mask=None, state=None, return_attention=False):
        f, A = self.fast, self.fast.attention
        h, _ = f.lstm(x)
        hist = torch.cat([h.new_zeros(x.size(0), L, h.size(-1)), h], dim=1)  # the window's slots, then the segment
        k, v, p = hist.split(f.d, dim=-1)
        mixed = A.W_Y(k)[:, L:] + A.W_h(k[:, L:]) + v[:, L:]  # stands in for r_t: products, no attention
        return torch.tanh(f.W_r(mixed) + f.W_x(p[:, L:]))


def main(repeats: int = 30, ceiling_only: bool = False) -> dict:
    torch.manual_seed(0)
    fast = build_reader(KeyValuePredictConfig(hidden=K, window=L), E)
    models = {"lstm300": _LSTMReference(E, 300), "kvp_parallel": fast, "kvp_stepwise": StepwiseKVP(fast),
              "lstm537_alone": LSTMAlone(),
              "kvp_products_only": KVPProductsOnly(fast), "ngram_matched": build_reader(NGramRNNConfig(hidden=540, n=4), E)}
    if ceiling_only:
        models = {k: v for k, v in models.items() if k in ("lstm300", "kvp_parallel", "lstm537_alone",
                                                              "kvp_products_only")}
    steps = {name: _Step(m, B, T, E, V, 0) for name, m in models.items()}
    for s in steps.values():
        s(), s()
    times = {name: [] for name in steps}
    for r in range(repeats):
        for name in list(steps) if r % 2 == 0 else list(steps)[::-1]:
            t0 = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - t0)
    med = {name: statistics.median(v) for name, v in times.items()}
    out = {name: {"tokens_per_s": round(B * T / v, 1), "ratio": round(med["lstm300"] / v, 4)} for name, v in med.items()}
    out["kvp_of_ceiling"] = round(med["kvp_products_only"] / med["kvp_parallel"], 4)
    out["ratio"] = out["kvp_of_ceiling"]
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--ceiling", action="store_true", help="only the kvp, its ceiling, the LSTM LM and lstm537_alone")
    args = ap.parse_args()
    out = main(args.repeats, args.ceiling)
    if not args.ceiling:
        out["lstm537_parts"] = lstm537_parts(args.repeats)
    print(json.dumps({**out, "repeats": args.repeats, "threads": torch.get_num_threads(), "torch": torch.__version__}))
