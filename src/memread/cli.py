"""The ``memread`` command.

    memread quickstart                      train a memoryless baseline and a memory reader on built-in stories
    memread train CONFIG [--set k=v ...]    train an experiment (TOML under configs/)
    memread train --resume RUN_DIR          continue a stopped or killed run exactly
    memread eval RUN_DIR [--split test]     metrics of the best checkpoint
    memread bench READER [--batch ...]      training tokens/s against torch's fused nn.LSTM
    memread attend RUN_DIR "a sentence"     PNG of which earlier words each word attended to
    memread data download ptb               fetch and lay out a public dataset
    memread data stories OUT_DIR            write the built-in stories (CBT format and LM text)

Errors caused by input print one line ``memread: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memread.errors import MemreadError


def _add_data_root(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", default=None, help="folder holding the datasets (default: $MEMREAD_DATA, else ~/.cache/memread/data)")


def cmd_train(args: argparse.Namespace) -> int:
    from memread.config import load_experiment
    from memread.data.root import data_root
    from memread.experiment import final_evaluation, resume_run, start_run

    root = data_root(args.data_root)
    if args.resume:
        run_dir = Path(args.resume)
        trainer = resume_run(run_dir, root, args.set)
    else:
        if not args.config:
            raise MemreadError("train needs a CONFIG file, or --resume RUN_DIR")
        cfg = load_experiment(args.config, args.set)
        run_dir = Path(args.run_dir) if args.run_dir else Path("runs") / Path(args.config).with_suffix("").name
        trainer = start_run(cfg, run_dir, root)
    print(f"run directory: {run_dir}", file=sys.stderr)
    try:
        trainer.fit()
    except KeyboardInterrupt:
        print(f"\ninterrupted; continue with: memread train --resume {run_dir}", file=sys.stderr)
        return 130
    result = final_evaluation(run_dir, root, progress=trainer.cfg.train.progress)
    print(json.dumps({"run_dir": str(run_dir), **result}))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.experiment import load_trained
    from memread.training.loop import evaluate

    cfg, task, model = load_trained(Path(args.run_dir), data_root(args.data_root), args.checkpoint)
    bs = args.batch_size or cfg.train.eval_batch_size or task.default_eval_batch_size
    metrics = evaluate(model, task, args.split, bs, progress=sys.stderr.isatty())
    print(json.dumps({"run_dir": args.run_dir, "split": args.split, "checkpoint": args.checkpoint, **metrics}))
    return 0


def cmd_quickstart(args: argparse.Namespace) -> int:
    from memread.quickstart import quickstart

    quickstart(Path(args.out), steps=args.steps, seed=args.seed)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from memread.bench import bench

    print(json.dumps(bench(args.reader, batch=args.batch, steps=args.steps, emb=args.emb, hidden=args.hidden,
                           vocab=args.vocab, repeats=args.repeats, reader_options=args.set)))
    return 0


def cmd_attend(args: argparse.Namespace) -> int:
    from memread.attend import attend
    from memread.data.root import data_root

    out = Path(args.out) if args.out else None
    print(attend(Path(args.run_dir), args.sentence, out, data_root(args.data_root)))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from memread.data import download
    from memread.data.root import data_root

    if args.data_command == "download":
        path = download.download(args.dataset, data_root(args.data_root), url=args.url, verify=not args.no_verify)
        print(f"{args.dataset}: ready in {path}")
    elif args.data_command == "stories":
        from memread.data.cbt import write_cbt
        from memread.data.stories import story_splits, story_text

        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        splits = story_splits(args.n, max(1, args.n // 10), max(1, args.n // 10), args.seed)
        for split, examples in splits.items():
            write_cbt(examples, out / f"stories_{split}.txt")
            (out / f"stories_{split}.lm.txt").write_text("\n".join(story_text(examples)) + "\n", encoding="utf-8")
        print(f"wrote {', '.join(f'{k}: {len(v)}' for k, v in splits.items())} stories to {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from memread import __version__

    parser = argparse.ArgumentParser(prog="memread", description="Memory-augmented neural readers.")
    parser.add_argument("--version", action="version", version=f"memread {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="baseline vs memory reader on built-in stories, in under 3 minutes")
    p.add_argument("--out", default="runs/quickstart", help="where to write the results and the attention PNG")
    p.add_argument("--steps", type=int, default=600, help="training steps per model")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)

    p = sub.add_parser("train", help="train an experiment")
    p.add_argument("config", nargs="?", help="TOML experiment file")
    p.add_argument("--run-dir", help="default: runs/<config name>")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint_last.pt")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a config value")
    _add_data_root(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a trained run")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--batch-size", type=int, default=0)
    _add_data_root(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("bench", help="training tokens/s of a reader against torch's fused nn.LSTM")
    p.add_argument("reader")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=35, help="sequence length (time steps)")
    p.add_argument("--emb", type=int, default=150)
    p.add_argument("--hidden", type=int, default=300)
    p.add_argument("--vocab", type=int, default=0, help="0: reader alone; N: whole LM with an N-word softmax")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="reader config value")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("attend", help="picture of a trained reader's intra-attention over a sentence")
    p.add_argument("run_dir")
    p.add_argument("sentence", help='words separated by spaces, e.g. "the cat sat on the mat"')
    p.add_argument("--out", help="PNG to write (default: RUN_DIR/attention.png)")
    _add_data_root(p)
    p.set_defaults(func=cmd_attend)

    p = sub.add_parser("data", help="datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    d = dsub.add_parser("download", help="fetch a public dataset into the data root")
    d.add_argument("dataset", choices=["ptb"])
    d.add_argument("--url", help="archive URL (default: the canonical public archive)")
    d.add_argument("--no-verify", action="store_true", help="skip the MD5 check of the extracted files")
    _add_data_root(d)
    d = dsub.add_parser("stories", help="write the built-in stories")
    d.add_argument("out_dir")
    d.add_argument("-n", type=int, default=4000, help="training stories (valid and test get a tenth each)")
    d.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_data)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MemreadError as e:
        print(f"memread: error: {e}", file=sys.stderr)
        return 2
