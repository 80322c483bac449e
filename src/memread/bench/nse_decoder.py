"""Training throughput of the NSE decoder (:mod:`memread.heads.decoders.nse`, the decoder of the NSE-NSE
translation model) against torch's fused ``nn.LSTM`` of the same size, measured in one process as
:mod:`memread.bench.readers` does.

The decoder reads a random target (B, T, E) teacher-forced (a padding-free target mask) and reads and
writes a random shared memory (B, S, k), standing for the encoder NSE's final memory, with a
padding-free source mask; the memory does not require a gradient, so the time is the decoder's alone.
The baseline is an ``nn.LSTM(E, k)`` (as many layers as the decoder) over the same target. A training
step is forward + backward of ``(states @ w).mean()`` for a fixed random ``w``; the two are timed
interleaved (ABBA), and the median step time gives tokens/s (target tokens). ``ratio`` = decoder
tokens/s / LSTM tokens/s. Per token the decoder does the read LSTM (8k^2 multiply-adds at E = k), the
compose layer (2k)^2 and the write LSTM 4k (2k + k): 24k^2 against the LSTM's 8k^2, so a ratio of
about 1/3 at most. ``device`` places both and the tensors (drawn on the CPU from the seed, then moved).
"""

from __future__ import annotations

import typing

import torch
from torch import nn

from memread.bench import device_fields, device_sync, median_step_times, reject_size_flags
from memread.heads.decoders.nse import NSEDecoder, NSEDecoderConfig
from memread.training.distributed import resolve_device
from memread.typed import parse_settings


def bench_nse_decoder(batch: int = 32, source: int = 30, target: int = 30, emb: int = 300, hidden: int = 300,
                      layers: int = 1, repeats: int = 20, warmup: int = 3, seed: int = 0,
                      device: str = "cpu") -> dict:
    """Tokens/s of a decoder training step, the NSE decoder against ``nn.LSTM`` at the same sizes, on
    ``device``; see the module docstring."""
    where = resolve_device(device)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)  # on the CPU: the same numbers on every device
    y = torch.randn(batch, target, emb, generator=g).to(where)
    y_mask = torch.ones(batch, target, dtype=torch.bool, device=where)
    M = torch.randn(batch, source, hidden, generator=g).to(where)  # the encoder's final memory, no gradient
    s_mask = torch.ones(batch, source, dtype=torch.bool, device=where)
    w = torch.randn(hidden, generator=g).to(where)
    decoder = NSEDecoder(NSEDecoderConfig(hidden=hidden, layers=layers), emb).to(where)
    baseline = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True).to(where)

    def step(model, states_of):
        def run():
            for p in model.parameters():
                p.grad = None
            (states_of(model) @ w).mean().backward()
        return run

    run_decoder = step(decoder, lambda m: m(y, y_mask, M, None, s_mask).states)
    run_base = step(baseline, lambda m: m(y)[0])
    t_decoder, t_base = median_step_times(run_decoder, run_base, repeats, warmup, device_sync(where))
    tokens = batch * target
    decoder_tps = tokens / t_decoder
    base_tps = tokens / t_base
    return {
        "decoder": "nse_decoder",
        "tokens_per_s": round(decoder_tps, 1),
        "lstm_tokens_per_s": round(base_tps, 1),
        "ratio": round(decoder_tps / base_tps, 4),
        "batch": batch, "source": source, "target": target, "emb": emb, "hidden": hidden, "layers": layers,
        "decoder_params": sum(p.numel() for p in decoder.parameters()),
        "lstm_params": sum(p.numel() for p in baseline.parameters()),
        "repeats": repeats, **device_fields(where), "threads": torch.get_num_threads(), "torch": torch.__version__,
    }


def bench_nse_decoder_command(args) -> dict:
    """``memread bench nse-decoder [--batch B] [--set key=value ...]``: sizes and options come from
    ``--set`` (the keywords of :func:`bench_nse_decoder`: source, target, emb, hidden, layers, repeats,
    warmup, seed); the token-reader size flags do not apply. Returns the JSON line's fields (the CLI
    prints them)."""
    reject_size_flags(args, "nse-decoder", "source=30 target=30 emb=300 hidden=300 layers=1 repeats=20 ...")
    types = {k: v for k, v in typing.get_type_hints(bench_nse_decoder).items()
             if k not in ("return", "batch", "device")}
    options = parse_settings(list(args.set or ()), types, "bench", "bench nse-decoder")
    return bench_nse_decoder(batch=args.batch, **options, device=getattr(args, "device", None) or "cpu")
