"""Learning curves: the validation metric of one or more runs by epoch, as a table and a PNG.

``memread curves RUN_DIR...`` reads each run's ``metrics.jsonl`` (written by
:mod:`memread.training.loop`, one JSON object a line) and keeps its ``valid`` records:

- the metric is the run's selection metric (the ``selection_metric`` a record names; older logs: the first of
  ``ppl``, ``map``, ``accuracy`` the records have), or ``--metric``;
- the x position of an evaluation is ``epochs_done``, the epochs completed when it ran (fractional for
  evaluations inside an epoch or runs capped by ``train.max_steps``). Logs written before that field
  existed place the k-th of m evaluations of an epoch at ``epoch + k / m``, which is exact for the
  evenly spaced ``train.evals_per_epoch``;
- the best evaluation is the last one the loop marked ``best`` (the weights in ``checkpoint_best.pt``);
  ``restore_best`` records (a return to those weights after a worse evaluation) and learning-rate changes
  are kept so the picture can mark them;
- once training has ended, the best checkpoint's test value comes from ``final.json``.

A malformed line, a run without ``metrics.jsonl``, a log with no evaluation yet and an unknown metric are
each one :class:`memread.errors.MemreadError` naming the file (and line).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from memread.errors import MemreadError

DEFAULT_METRICS = ("ppl", "map", "accuracy")  # for logs older than the ``selection_metric`` field


@dataclass
class Curve:
    name: str
    metric: str
    epochs: list[float]  # epochs completed at each evaluation
    values: list[float]
    lrs: list[float]
    best: int  # index of the evaluation checkpoint_best.pt holds
    restored: list[float] = field(default_factory=list)  # epochs at which the best weights came back
    test: float | None = None  # the best checkpoint's test value, from final.json once training has ended

    @property
    def best_value(self) -> float:
        return self.values[self.best]


def run_names(run_dirs: Sequence[Path]) -> list[str]:
    """The shortest path endings that tell the runs apart: ``lstm/seed1`` and ``lstmn/seed1`` for two
    ``.../seed1`` folders, the folder names where those differ (each run's full path where none do)."""
    parts = [Path(d).resolve().parts for d in run_dirs]
    for k in range(1, max(map(len, parts), default=0) + 1):
        names = ["/".join(p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(d) for d in run_dirs]


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise MemreadError(f"{path}: no such file (is {path.parent} a memread run directory?)")
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise MemreadError(f"{path}, line {number}: not a JSON object ({e.msg})") from None
        if not isinstance(record, dict) or "event" not in record:
            raise MemreadError(f"{path}, line {number}: not a metrics record (no \"event\")")
        records.append(record)
    return records


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _epochs(valid: list[dict]) -> list[float]:
    """Epochs completed at each evaluation: ``epochs_done`` where logged, else spread within each epoch."""
    per_epoch: dict[int, int] = defaultdict(int)
    for r in valid:
        per_epoch[int(r.get("epoch", 0))] += 1
    seen: dict[int, int] = defaultdict(int)
    out = []
    for r in valid:
        e = int(r.get("epoch", 0))
        seen[e] += 1
        out.append(float(r["epochs_done"]) if "epochs_done" in r else e + seen[e] / per_epoch[e])
    return out


def read_curve(run_dir: Path, metric: str | None = None, name: str | None = None) -> Curve:
    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    records = read_records(path)
    valid = [r for r in records if r["event"] == "valid"]
    if not valid:
        raise MemreadError(f"{path}: no validation yet (no \"valid\" records)")
    if metric is None:
        metric = valid[-1].get("selection_metric") or next((m for m in DEFAULT_METRICS if m in valid[-1]), None)
        if metric is None:
            raise MemreadError(f"{path}: cannot tell the selection metric; name one with --metric")
    for number, r in enumerate(valid, start=1):
        if not _is_number(r.get(metric)):
            have = sorted(k for k, v in r.items() if _is_number(v) and k not in ("step", "epoch", "epochs_done"))
            raise MemreadError(f"{path}: validation {number} has no metric {metric!r} (it has {', '.join(have)})")
    best = max((i for i, r in enumerate(valid) if r.get("best")), default=0)
    epochs = _epochs(valid)
    by_step = {r["step"]: x for r, x in zip(valid, epochs)}
    restored = [by_step[r["step"]] for r in records if r["event"] == "restore_best" and r.get("step") in by_step]
    return Curve(name or run_dir.name, metric, epochs, [float(r[metric]) for r in valid],
                 [float(r.get("lr", float("nan"))) for r in valid], best, restored,
                 _final_test(run_dir, metric, float(valid[best][metric])))


def _final_test(run_dir: Path, metric: str, best_valid: float) -> float | None:
    """The test value of ``final.json`` when it was computed from the current best checkpoint (its valid
    value is the log's best); None before training ended, or when training went on after it was written."""
    path = run_dir / "final.json"
    if not path.is_file():
        return None
    try:
        final = json.loads(path.read_text(encoding="utf-8"))
        valid, test = final.get("valid", {}).get(metric), final.get("test", {}).get(metric)
    except (json.JSONDecodeError, AttributeError):
        raise MemreadError(f"{path}: not the JSON object memread writes at the end of training") from None
    if not (_is_number(valid) and _is_number(test)) or abs(valid - best_valid) > 1e-6 * max(1.0, abs(best_valid)):
        return None
    return float(test)


def _label(x: float) -> str:
    return f"{x:g}" if abs(x - round(x)) > 1e-9 else str(int(round(x)))


def curves_table(curves: Sequence[Curve]) -> str:
    """Rows = runs, columns = epochs (the union of every run's evaluation points); the best value starred."""
    columns = sorted({round(x, 4) for c in curves for x in c.epochs})
    width = max(len(c.name) for c in curves)
    lines = [f"{'epochs':<{width}}  " + " ".join(f"{_label(x):>8}" for x in columns) + "      best      test"]
    for c in curves:
        at = {round(x, 4): (i, v) for i, (x, v) in enumerate(zip(c.epochs, c.values))}
        cells = []
        for x in columns:
            if x not in at:
                cells.append(f"{'':>8}")
                continue
            i, v = at[x]
            cells.append(f"{v:>7.2f}{'*' if i == c.best else ' '}")
        test = f"{c.test:10.2f}" if c.test is not None else ""
        lines.append(f"{c.name:<{width}}  " + " ".join(cells) + f"  {c.best_value:8.2f}{test}")
    metrics = sorted({c.metric for c in curves})
    lines.append(f"(valid {', '.join(metrics)}; * the evaluation checkpoint_best.pt holds; test: its final.json)")
    return "\n".join(lines)


def curves_png(curves: Sequence[Curve], path: Path, title: str = "", log_y: bool = False) -> Path:
    """One line per run, its best evaluation ringed, returns to the best weights marked x, lr changes |."""
    from memread.tools.viz import plt, save

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for c in curves:
        test = f", test {c.test:.2f}" if c.test is not None else ""
        (line,) = ax.plot(c.epochs, c.values, marker=".", label=f"{c.name} (best {c.best_value:.2f}{test})")
        ax.plot([c.epochs[c.best]], [c.best_value], marker="o", markersize=10, fillstyle="none", color=line.get_color())
        for x in c.restored:
            ax.plot([x], [c.values[c.epochs.index(x)]], marker="x", markersize=8, color=line.get_color())
        for i in range(1, len(c.lrs)):
            if c.lrs[i] != c.lrs[i - 1]:
                ax.plot([c.epochs[i]], [c.values[i]], marker="|", markersize=14, color=line.get_color())
    ax.set_xlabel("epochs")
    metrics = sorted({c.metric for c in curves})
    ax.set_ylabel(f"valid {', '.join(metrics)}")
    if log_y:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "validation by epoch (o best, | lr changed, x best weights restored)", fontsize=9)
    return save(fig, path)
