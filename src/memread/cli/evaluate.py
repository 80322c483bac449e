"""Verbs that measure trained runs: ``eval``, ``compare`` (a paired test of two runs), ``curves``, ``ensemble``
(cloze runs averaged) and ``cbt-lm`` (a language model on CBT-format cloze files)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from memread.cli.common import SEED, add_data_root, add_device, model_device, real, trained_lm, whole
from memread.cli.reproduce import reproduction


def add_eval(sub) -> None:
    p = sub.add_parser("eval", help="evaluate a trained run")
    p.add_argument("run_dir")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--batch-size", type=whole(0), default=0)
    p.add_argument("--context", choices=["stream", "sentence"], default=None,
                   help="a language model: read the split as one stream or each sentence alone, whichever protocol "
                        "it was trained in (default: its own)")
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.experiment import load_trained
    from memread.training.loop import evaluate

    args.on_interrupt = "in the evaluation: nothing was written"
    device = model_device(args)
    cfg, task, model = load_trained(Path(args.run_dir), data_root(args.data_root, run=args.run_dir), args.checkpoint,
                                    device, context=args.context)
    # a run's own eval batch size belongs to its own protocol
    bs = args.batch_size or (args.context is None and cfg.train.eval_batch_size) or task.default_eval_batch_size
    metrics = evaluate(model, task, args.split, bs, progress=sys.stderr.isatty())
    told = {"context": args.context} if args.context else {}
    print(json.dumps({"run_dir": args.run_dir, "split": args.split, "checkpoint": args.checkpoint, **told, **metrics}))
    return 0


def add_compare(sub) -> None:
    p = sub.add_parser("compare", help="paired significance test of two trained runs on the same split",
                       description="Evaluate two runs on the same split and test the difference of a metric with a "
                                   "paired permutation test (p-value) and a paired bootstrap (confidence interval), "
                                   "resampling the criterion's units: examples, questions or LM segment rows.")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--metric", default=None, help="default: the criterion's selection metric (ppl, accuracy, map)")
    p.add_argument("--batch-size", type=whole(0), default=0,
                   help="the same for both runs (default: run A's eval batch size)")
    p.add_argument("--resamples", type=whole(1), default=10_000)
    p.add_argument("--confidence", type=real(0, 1, above=True, below=True), default=0.95)
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--seeds", type=whole(0), default=0, metavar="N",
                   help="RUN_A and RUN_B hold seed1 .. seedN (as memread reproduce writes them): per-seed paired "
                        "tests, the paired test of the seeds pooled, and Welch's t-test of the seeds' values")
    p.add_argument("--record", metavar="EXPERIMENT", default=None,
                   help="append the difference and its tests to the results file as this experiment")
    p.add_argument("--paper-value", type=real(), default=None, help="with --record: the paper's difference A - B")
    p.add_argument("--results", default=None,
                   help="with --record: the results file (default: $MEMREAD_RESULTS, else results/results.jsonl)")
    add_data_root(p)
    add_device(p)
    p.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.compare import compare_runs, compare_seeds, ending_fields, summary_text

    ledger = reproduction(None, "memread compare --record").ledger if args.record else None  # before any work
    start = time.perf_counter()
    root = data_root(args.data_root, run=Path(args.run_a) / "seed1" if args.seeds else args.run_a)  # run A's root
    if args.seeds:
        result = compare_seeds(args.run_a, args.run_b, args.seeds, root, args.split,
                               args.checkpoint, args.metric, args.batch_size, model_device(args), args.resamples,
                               args.confidence, args.seed, progress=sys.stderr.isatty())
    else:
        result = compare_runs(args.run_a, args.run_b, root, args.split, args.checkpoint,
                              args.metric, args.batch_size, model_device(args), args.resamples, args.confidence,
                              args.seed, progress=sys.stderr.isatty())
    print(json.dumps(result))
    print(summary_text(result), file=sys.stderr)
    if args.record:
        from memread.experiment import read_run_config

        first = Path(args.run_a) / "seed1" if args.seeds else Path(args.run_a)
        command = shlex.join(["memread", *sys.argv[1:]]) if sys.argv[1:2] == ["compare"] else "memread compare"
        line = ledger.result_line(result, args.record, read_run_config(first).data.name, command, ledger.git_commit(),
                                  time.perf_counter() - start, args.paper_value)
        seeds = range(1, (args.seeds or 0) + 1)
        runs = [[Path(r) / f"seed{s}" for s in seeds] if args.seeds else [Path(r)] for r in (args.run_a, args.run_b)]
        # how each run ended (a run a cap stopped while still improving: not converged) and what it cost
        line.update(ending_fields(*runs) or {})
        out = ledger.results_path(args.results)
        ledger.append_lines(out, [line])
        print(f"appended {args.record} to {out}", file=sys.stderr)
    return 0


def add_curves(sub) -> None:
    p = sub.add_parser("curves", help="validation metric of one or more runs by epoch, as a table and a PNG")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--metric", default=None, help="a metric of the valid records (default: the run's selection metric)")
    p.add_argument("--out", default="runs/curves.png", help="PNG to write ('-': the table only)")
    p.add_argument("--title", default="")
    p.add_argument("--log-y", action="store_true", help="logarithmic metric axis")
    p.set_defaults(func=cmd_curves)


def cmd_curves(args: argparse.Namespace) -> int:
    from memread.tools.curves import curves_png, curves_table, read_curve, run_names

    if args.out != "-":  # before the runs are read or the table printed
        from memread.tools.viz import check_picture_path

        check_picture_path(Path(args.out))
    runs = [Path(r) for r in args.run_dirs]
    curves = [read_curve(r, args.metric, name) for r, name in zip(runs, run_names(runs))]
    print(curves_table(curves))
    if args.out != "-":
        png = curves_png(curves, Path(args.out), args.title, args.log_y)
        print(f"wrote {png}", file=sys.stderr)
    return 0


def add_ensemble(sub) -> None:
    p = sub.add_parser("ensemble", help="accuracy of the averaged answer distributions of cloze runs")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"])
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--batch-size", type=whole(0), default=0)
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_ensemble)


def cmd_ensemble(args: argparse.Namespace) -> int:
    from memread.data.root import data_root
    from memread.tools.ensemble import ensemble

    device = model_device(args)
    root = data_root(args.data_root, run=args.run_dirs[0])
    print(json.dumps(ensemble([Path(r) for r in args.run_dirs], root, args.split, args.checkpoint,
                              args.batch_size, device)))
    return 0


def add_cbt_lm(sub) -> None:
    p = sub.add_parser("cbt-lm", help="answer CBT-format cloze questions with a trained language model")
    p.add_argument("run_dir")
    p.add_argument("files", nargs="+", help="CBT-format files (cbtest_NE_test_2500ex.txt, memread cloze sets, ...)")
    p.add_argument("--checkpoint", default="best", choices=["best", "last"])
    p.add_argument("--context-lines", type=whole(0), default=20, help="required context lines per question (0: any)")
    p.add_argument("--questions-per-batch", type=whole(1), default=8)
    add_device(p)
    add_data_root(p)
    p.set_defaults(func=cmd_cbt_lm)


def cmd_cbt_lm(args: argparse.Namespace) -> int:
    from memread.tools.cbt_lm import evaluate_cbt_file

    device = model_device(args)
    _, task, model = trained_lm(args, args.run_dir, device)
    for path in args.files:
        r = evaluate_cbt_file(model, task.vocab, Path(path), args.context_lines or None, args.questions_per_batch)
        print(json.dumps({"run_dir": args.run_dir, "checkpoint": args.checkpoint, **r}), flush=True)
    return 0
