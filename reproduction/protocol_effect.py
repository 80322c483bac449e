"""How far the protocol alone moves a language model's perplexity: each trained run read both ways, the continuous
stream (state carried across BPTT segments, evaluated at batch size 1) and each sentence alone (``<s> .. <eos>``,
nothing carried), with the weights it was trained with::

    python -m reproduction.protocol_effect RUN [RUN ..] [--split test] [--record NAME]

prints one line a run and protocol; ``--record NAME`` appends them to ``results/results.jsonl`` as experiments
``NAME-<trained>-trained-read-as-<read>`` (metric ``ppl``). A model trained on the stream has no ``<s>``: read per
sentence it starts each sentence with ``<eos>``, the token that precedes a sentence in the stream
(:mod:`memread.data.sentence_lm`)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from memread.errors import MemreadError

PROTOCOLS = ("stream", "sentence")


def read_both_ways(run: Path, data_root: Path, split: str = "test") -> list[dict]:
    """``run``'s best checkpoint on ``split`` in each protocol: ``{"run", "trained", "read", "ppl", "tokens"}``."""
    from memread.experiment import load_trained, read_run_config
    from memread.training.loop import evaluate

    run = Path(run)
    cfg = read_run_config(run)
    trained = getattr(cfg.data, "context", None)
    if trained is None:
        raise MemreadError(f"{run}: not a language model (data '{cfg.data.name}'): it has no protocol to change")
    out = []
    for read in PROTOCOLS:
        cfg_read, task, model = load_trained(run, data_root, "best", context=read)
        batch_size = (cfg.train.eval_batch_size if read == trained else 0) or task.default_eval_batch_size
        metrics = evaluate(model, task, split, batch_size, precision=cfg.train.precision)
        out.append({"run": str(run), "trained": trained, "read": read, "ppl": metrics["ppl"],
                    "tokens": metrics["tokens"], "batch_size": batch_size, "seed": cfg.train.seed})
    return out


def result_lines(rows: list[dict], name: str, dataset: str, split: str, command: str, commit: str | None,
                 wall_s: float) -> list[dict]:
    return [{"experiment": f"{name}-{r['trained']}-trained-read-as-{r['read']}", "dataset": dataset, "split": split,
             "metric": "ppl", "value": round(r["ppl"], 4), "paper_value": None, "commit": commit, "command": command,
             "wall_s": round(wall_s, 1), "seeds": [r["seed"]], "run": r["run"], "tokens": r["tokens"]} for r in rows]


def main(argv: list[str] | None = None) -> int:
    from memread.data.root import data_root

    ap = argparse.ArgumentParser(prog="python -m reproduction.protocol_effect", description=__doc__.split("::")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--split", default="test", choices=["valid", "test"])
    ap.add_argument("--data-root")
    ap.add_argument("--record", metavar="NAME", help="append the numbers to results/results.jsonl")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    try:
        rows = [r for run in args.runs for r in read_both_ways(run, data_root(args.data_root, run=run), args.split)]
    except MemreadError as e:
        print(f"protocol_effect: error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        own = " (its own)" if r["read"] == r["trained"] else ""
        print(f"{r['run']}: trained on the {r['trained']}, read as {r['read']}{own}: {args.split} ppl {r['ppl']:.2f} "
              f"over {int(r['tokens']):,} targets")
    if args.record:
        from memread.experiment import read_run_config
        from reproduction.ledger import append_lines, git_commit, results_path

        dataset = read_run_config(args.runs[0]).data.name
        command = "python -m reproduction.protocol_effect " + shlex.join(argv if argv is not None else sys.argv[1:])
        lines = result_lines(rows, args.record, dataset, args.split, command, git_commit(),
                             time.perf_counter() - start)
        append_lines(results_path(), lines)
        print(f"recorded {len(lines)} lines in {results_path()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
