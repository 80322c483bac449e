"""Training throughput of the LSTMN deep-fusion decoder (:mod:`memread.heads.decoders.lstmn_fusion`) against an
LSTM decoder with RNNSearch attention, measured in one process as :mod:`memread.bench.readers` does.

Both decoders read the same random target (B, T, E) teacher-forced, conditioned on the same random
source tapes (B, S, H) (hidden tape Y and, for deep fusion, memory tape A) with a padding-free source
mask. The source tapes stand for an encoder's output: by default they do not require a gradient
(``source_grad=False``), so the time is the decoder's alone; with ``source_grad=True`` both decoders
also send gradients into them, as when the encoder is trained with them. A training step is forward
+ backward of ``(states @ w).mean()`` for a fixed random ``w``; the two are timed interleaved (ABBA),
and the median step time gives tokens/s (target tokens). ``ratio`` = fusion tokens/s / baseline
tokens/s. ``device`` places both decoders and the tensors (drawn on the CPU from the seed, then moved);
on CUDA each timed step is bracketed by ``torch.cuda.synchronize`` (the baseline's cell is cuDNN's).

The baseline is the usual way to write RNNSearch with an LSTM (Bahdanau et al. 2014, with an LSTM cell):
keys ``W_k gamma_j`` projected once, then per step ``alpha = softmax(v^T tanh(W_k gamma_j + W_q h_{t-1}))``
(:class:`memread.modules.attention.AdditiveAttention`), ``ctx_t = sum_j alpha_j gamma_j`` and torch's
fused ``nn.LSTMCell`` on ``[x_t; ctx_t]``; its states are the ``h_t``.
"""

from __future__ import annotations

import typing

import torch
from torch import Tensor, nn

from memread.bench import device_fields, device_sync, median_step_times, reject_size_flags
from memread.errors import MemreadError
from memread.modules.attention import AdditiveAttention
from memread.heads.decoders.lstmn_fusion import FusionConfig, LSTMNFusionDecoder
from memread.training.distributed import resolve_device
from memread.typed import parse_settings


class AttentionLSTMDecoder(nn.Module):
    """LSTM decoder with additive (RNNSearch) attention over a source hidden tape (the baseline)."""

    def __init__(self, input_size: int, source_size: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.attention = AdditiveAttention(source_size, hidden, hidden)
        self.cell = nn.LSTMCell(input_size + source_size, hidden)

    def forward(self, y: Tensor, y_mask, source_states: Tensor, source_cells, source_mask: Tensor) -> Tensor:
        B, T, _ = y.shape
        keys = self.attention.project_keys(source_states)  # once per sequence  (B, S, A)
        h = c = y.new_zeros(B, self.hidden)
        out = []
        for t in range(T):
            alpha = self.attention(h, source_states, source_mask, projected_keys=keys)  # (B, S), query h_{t-1}
            ctx = torch.bmm(alpha.unsqueeze(1), source_states).squeeze(1)  # (B, Hs)
            h, c = self.cell(torch.cat([y[:, t], ctx], dim=1), (h, c))
            out.append(h)
        return torch.stack(out, dim=1)  # (B, T, H)


def bench_deep_fusion(batch: int = 32, source: int = 30, target: int = 30, emb: int = 300, hidden: int = 300,
                      repeats: int = 20, warmup: int = 3, source_grad: bool = False, fusion: str = "lstmn_deep",
                      seed: int = 0, device: str = "cpu") -> dict:
    """Tokens/s of a decoder training step, LSTMN fusion (``fusion``: ``lstmn_deep`` or ``lstmn_shallow``)
    against the RNNSearch LSTM decoder at the same sizes, on ``device``; see the module docstring."""
    where = resolve_device(device)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)  # on the CPU: the same numbers on every device
    y = torch.randn(batch, target, emb, generator=g).to(where)
    y_mask = torch.ones(batch, target, dtype=torch.bool, device=where)
    Y = torch.randn(batch, source, hidden, generator=g).tanh().to(where).requires_grad_(source_grad)
    A = torch.randn(batch, source, hidden, generator=g).to(where).requires_grad_(source_grad)
    s_mask = torch.ones(batch, source, dtype=torch.bool, device=where)
    w = torch.randn(hidden, generator=g).to(where)
    decoder = LSTMNFusionDecoder(FusionConfig(fusion, hidden=hidden), emb, hidden).to(where)
    baseline = AttentionLSTMDecoder(emb, hidden, hidden).to(where)

    def step(model, states_of):
        def run():
            for p in (*model.parameters(), Y, A):
                p.grad = None
            states = states_of(model(y, y_mask, Y, A, s_mask))
            (states @ w).mean().backward()
        return run

    run_fusion = step(decoder, lambda out: out.states)
    run_base = step(baseline, lambda out: out)
    t_fusion, t_base = median_step_times(run_fusion, run_base, repeats, warmup, device_sync(where))
    tokens = batch * target
    fusion_tps = tokens / t_fusion
    base_tps = tokens / t_base
    return {
        "decoder": fusion,
        "tokens_per_s": round(fusion_tps, 1),
        "baseline_tokens_per_s": round(base_tps, 1),
        "ratio": round(fusion_tps / base_tps, 4),
        "batch": batch, "source": source, "target": target, "emb": emb, "hidden": hidden,
        "source_grad": source_grad,
        "decoder_params": sum(p.numel() for p in decoder.parameters()),
        "baseline_params": sum(p.numel() for p in baseline.parameters()),
        "repeats": repeats, **device_fields(where), "threads": torch.get_num_threads(), "torch": torch.__version__,
    }


def bench_deep_fusion_command(args) -> dict:
    """``memread bench lstmn-deep-fusion [--batch B] [--set key=value ...]``: sizes and options come from
    ``--set`` (the keywords of :func:`bench_deep_fusion`: source, target, emb, hidden, repeats, warmup,
    source_grad, fusion, seed); the token-reader size flags do not apply."""
    reject_size_flags(args, "lstmn-deep-fusion", "source=30 target=30 emb=300 hidden=300 repeats=20 source_grad=false ...")
    types = {k: v for k, v in typing.get_type_hints(bench_deep_fusion).items() if k not in ("return", "batch", "device")}
    options = parse_settings(list(args.set or ()), types, "bench", "bench lstmn-deep-fusion")
    if options.get("fusion", "lstmn_deep") not in ("lstmn_deep", "lstmn_shallow"):
        raise MemreadError(f"--set fusion: expected lstmn_deep or lstmn_shallow, got {options['fusion']!r}")
    return bench_deep_fusion(batch=args.batch, **options, device=getattr(args, "device", None) or "cpu")
