"""``memread bench`` (a reader's training tokens/s against its baseline) and ``memread match-params``."""

from __future__ import annotations

import argparse
import json

from memread.cli.common import add_device, model_device, whole
from memread.errors import MemreadError


def add_bench(sub) -> None:
    # torch-free: the token bench's defaults, which bench iaa/fusion check against
    from memread.bench import TOKEN_FLAGS

    p = sub.add_parser("bench", help="training tokens/s of a reader against torch's fused nn.LSTM")
    p.add_argument("reader")
    p.add_argument("--batch", type=whole(1), default=TOKEN_FLAGS["batch"])
    p.add_argument("--steps", type=whole(1), default=TOKEN_FLAGS["steps"], help="sequence length (time steps)")
    p.add_argument("--emb", type=whole(1), default=TOKEN_FLAGS["emb"])
    p.add_argument("--hidden", type=whole(1), default=TOKEN_FLAGS["hidden"])
    p.add_argument("--vocab", type=whole(1), default=TOKEN_FLAGS["vocab"],
                   help="0: reader alone; N: whole LM with an N-word softmax")
    p.add_argument("--repeats", type=whole(1), default=TOKEN_FLAGS["repeats"])
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="reader config value")
    p.add_argument("--match-params", action="store_true",
                   help="choose the reader's hidden size so its model (the LM with --vocab) "
                   "has the LSTM's parameter count")
    add_device(p)  # the reader, its baseline and their inputs
    p.set_defaults(func=cmd_bench)


# benches of readers that are not one sequence in, states out: each against its named baseline
SPECIAL_BENCHES = {
    "iaa": ("memread.bench.cloze", "bench_iaa_command"),  # (query, document) reader vs the AS Reader
    "lstmn-deep-fusion": ("memread.bench.fusion", "bench_deep_fusion_command"),  # decoder vs LSTM + attention
    "nse-decoder": ("memread.bench.nse_decoder", "bench_nse_decoder_command"),  # NSE-NSE decoder vs nn.LSTM
}


def cmd_bench(args: argparse.Namespace) -> int:
    args.device = model_device(args)  # the special benches read it from args
    if args.reader in SPECIAL_BENCHES:
        import importlib

        module, function = SPECIAL_BENCHES[args.reader]
        print(json.dumps(getattr(importlib.import_module(module), function)(args)))
        return 0
    from memread.bench.readers import bench

    print(json.dumps(bench(args.reader, batch=args.batch, steps=args.steps, emb=args.emb, hidden=args.hidden,
                           vocab=args.vocab, repeats=args.repeats, reader_options=args.set,
                           match_params=args.match_params, device=args.device)))
    return 0


def add_match_params(sub) -> None:
    p = sub.add_parser("match-params",
                       help="the reader's hidden size whose LM has the parameter count of the baseline LM")
    p.add_argument("reader")
    p.add_argument("--vocab", type=whole(1), required=True, help="vocabulary size (PTB in memread: 10001)")
    p.add_argument("--emb", type=whole(1), default=300, help="word embedding size w")
    p.add_argument("--hidden", type=whole(1), default=300, help="the baseline's hidden size")
    p.add_argument("--baseline", default="doc_lstm", help="baseline reader (default doc_lstm)")
    p.add_argument("--tie-weights", action="store_true")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="reader config value, e.g. window=5")
    p.set_defaults(func=cmd_match_params)


def cmd_match_params(args: argparse.Namespace) -> int:
    import dataclasses

    from memread.bench.readers import reader_config
    from memread.params import lm_parameters, match_lm_hidden

    cfg = reader_config(args.reader, args.hidden, args.set)
    if "hidden" not in {f.name for f in dataclasses.fields(cfg)}:
        raise MemreadError(f"match-params: reader {args.reader!r} has no hidden size to choose")
    base = reader_config(args.baseline, args.hidden, [])
    m = match_lm_hidden(cfg, args.vocab, args.emb, base, args.tie_weights)
    print(json.dumps({"reader": args.reader, "hidden": m.hidden, "params": m.params, "baseline": args.baseline,
                      "baseline_hidden": args.hidden, "baseline_params": m.target, "difference": m.difference,
                      "vocab": args.vocab, "emb": args.emb,
                      "params_without_embedding": m.params - args.vocab * args.emb,
                      "baseline_without_embedding":
                          lm_parameters(base, args.vocab, args.emb, args.tie_weights) - args.vocab * args.emb}))
    return 0
