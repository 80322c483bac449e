"""The driver behind ``memread reproduce ROW --seeds N``: train a row's config with seeds 1..N (each resumed where a
run is there), evaluate each seed's best checkpoint, and append the mean and each seed's numbers to the ledger."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from memread.errors import MemreadError
from memread.typed import override_value
from reproduction.ledger import CHANGED, append_lines, git_commit, is_number, results_path
from reproduction.rows import Row, config_path, find_row, rows, siblings


def _differences(stored: Any, wanted: Any) -> dict[str, Any]:
    """``{"section.key": wanted value}`` where two experiment configs differ."""
    a, b = json.loads(stored.to_json()), json.loads(wanted.to_json())
    out = {}
    for section in b:
        for key in sorted(set(a.get(section, {})) | set(b[section])):
            if a.get(section, {}).get(key) != b[section].get(key):
                out[f"{section}.{key}"] = b[section].get(key)
    return out


def train_seed(cfg: Any, run_dir: Path, root: Path, log: Callable[[str], None]) -> dict:
    """Train ``cfg`` in ``run_dir`` and evaluate its best checkpoint (``final.json``); a run dir that already holds
    this config's run is resumed exactly from ``checkpoint_last.pt`` (a killed run goes on; a finished one with its
    ``final.json`` is taken as it is). [train] values that differ (a larger ``train.max_steps``) are passed to the
    resume; a run of another model or data is refused. A folder with ``final.json`` but no checkpoint holds an
    ended run's records, kept from the machine that trained it (``python -m reproduction.claims`` puts them back): its
    ``final.json`` is taken as it is when its config is this one; asked to train it further, it is refused, never
    cleared."""
    from memread.experiment import ANY_ON_RESUME, final_evaluation, read_run_config, resume_run, start_run

    run_dir = Path(run_dir)
    checkpoint = (run_dir / "checkpoint_last.pt").exists()
    final = run_dir / "final.json"
    if checkpoint or final.is_file():
        diff = _differences(read_run_config(run_dir), cfg)
        other = [k for k in diff if not k.startswith("train.")]
        if other:
            raise MemreadError(f"{run_dir}: holds a run of another config ({other[0]} differs); choose another "
                               f"--run-root or remove that folder. Nothing was changed")
        if all(k in ANY_ON_RESUME for k in diff) and final.is_file():
            log(f"{run_dir}: finished before{'' if checkpoint else ' (trained elsewhere)'}; taking its final.json")
            return json.loads(final.read_text(encoding="utf-8"))
        if not checkpoint:
            wanted = ", ".join(f"{k}={override_value(v)}" for k, v in diff.items() if k not in ANY_ON_RESUME)
            raise MemreadError(f"{run_dir}: holds an ended run's records (final.json) without its checkpoints "
                               f"(trained elsewhere?), so it cannot train on with {wanted}; reproduce it with the "
                               f"settings it was trained with, or choose another --run-root. Nothing was changed")
        log(f"{run_dir}: resuming from checkpoint_last.pt")
        trainer = resume_run(run_dir, root, [f"{k}={override_value(v)}" for k, v in diff.items()])
    else:
        trainer = start_run(cfg, run_dir, root)
    with trainer:
        trainer.fit()
        return final_evaluation(run_dir, root, progress=trainer.cfg.train.progress, device=str(trainer.device))


def _off_config(base: Any, cfg: Any) -> str:
    """What ``cfg`` changes outside ``[train]`` from the row's own config ``base`` (a smaller reader, say), as
    "reader.hidden=300 (config: 512), reader.layers=1 (config: 3)"; "" where nothing is changed. A number trained so
    is not the config's (another model, or other data or batching), and its budget says so wherever the table shows
    it."""
    before = json.loads(base.to_json())
    out = []
    for key, value in _differences(base, cfg).items():
        if key.startswith("train."):
            continue
        section, name = key.split(".", 1)
        out.append(f"{key}={override_value(value)} (config: {override_value(before.get(section, {}).get(name))})")
    return ", ".join(out)


def _budget(loop: dict, cfg: Any) -> str:
    T = cfg.train
    steps, stopped = loop.get("global_step"), loop.get("stopped")
    cap = f"max_steps {T.max_steps}, " if T.max_steps else ""
    epoch = min(int(loop.get("epoch", 0)) + 1, T.epochs)  # a run that used up its epochs stands past the last
    tokens = f", {loop['tokens_trained']:,} tokens" if loop.get("tokens_trained") else ""
    return f"{steps} steps{tokens} (epoch {epoch} of {T.epochs}; {cap}stopped: {stopped or 'not finished'})"


def _mean_std(values: list[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) >= 2 else None)


def reproduce(row_id: str, seeds: int = 1, run_root: str | os.PathLike = "runs/reproduce",
              overrides: Sequence[str] = (), data_root: str | os.PathLike | None = None,
              results: str | os.PathLike | None = None, device: str | None = None,
              table: Sequence[Row] | None = None, log: Callable[[str], None] | None = None,
              runs: str | os.PathLike | None = None) -> list[dict]:
    """Train ``row_id``'s config with seeds 1..``seeds`` in ``RUN_ROOT/ROW_ID/seedS``, or ``RUNS/seedS`` where
    ``runs`` is given (a claim's runs of the row, ``runs/claims/CLAIM/LABEL``), each resumed where a run is
    there, evaluate the best checkpoint of each on valid and test, and append to the results file, for every
    metric the row and its siblings report and both splits: one line with the mean over seeds (``seeds``,
    ``per_seed``, ``std`` with several), then one line per seed (with ``seed``). ``wall_s`` is what training cost:
    a seed's wall seconds over every resume (a run taken as it is cost those, not this call's moment), their sum on
    the mean line. Returns the appended lines.
    A row without a config or without its data is refused with one line, before anything runs."""
    from memread.config import load_experiment
    from memread.data.root import data_root as resolve_root
    from memread.training.units import run_loop

    log = log or (lambda text: print(text, file=sys.stderr))
    table = rows() if table is None else table
    row = find_row(row_id, table)
    if row.data_missing:
        raise MemreadError(f"{row.id}: {row.data_missing}; nothing was run")
    if row.config is None:
        raise MemreadError(f"{row.id}: memread has no config for {row.name!r} ({row.paper}, {row.table}); "
                           f"nothing was run")
    if seeds < 1:
        raise MemreadError(f"--seeds {seeds}: at least 1")
    path = config_path(row)
    extra = list(overrides) + ([f"train.device={json.dumps(device)}"] if device else [])
    configs = {s: load_experiment(path, [*extra, f"train.seed={s}"]) for s in range(1, seeds + 1)}  # all checked first
    off = _off_config(load_experiment(path, []), configs[1])
    group = siblings(row, table)
    metrics = list(dict.fromkeys(r.metric for r in group))
    root = resolve_root(data_root)
    out_path = results_path(results)
    commit = git_commit()
    sets = "".join(f" --set {o}" for o in overrides)
    where = f"--runs {runs}" if runs is not None else f"--run-root {run_root}"

    def seed_dir(s: int) -> Path:
        return Path(runs) / f"seed{s}" if runs is not None else Path(run_root) / row.id / f"seed{s}"

    command = (f"memread reproduce {row.id} --seeds {seeds} {where}{sets}"
               + (f" --device {device}" if device else ""))

    finals, walls, budgets = {}, {}, {}
    for s, cfg in configs.items():
        run_dir = seed_dir(s)
        log(f"== {row.id}: seed {s} of {seeds} in {run_dir}")
        t0 = time.perf_counter()
        finals[s] = train_seed(cfg, run_dir, root, log)
        loop = run_loop(run_dir) or {}
        # what the seed cost: its training's wall seconds over every resume (a run taken as it is, or trained
        # elsewhere, cost that, not this call's moment), else this call's time
        walls[s] = loop.get("seconds_trained") or time.perf_counter() - t0
        budgets[s] = _budget(loop, cfg)
    note = f"; {CHANGED}: {off}" if off else ""
    wall = sum(walls.values())

    def paper_value(metric: str, split: str) -> float | None:
        for r in group:
            if (r.metric, r.split) == (metric, split):
                return r.paper_value
        return None

    lines = []
    for split in ("valid", "test"):
        for metric in metrics:
            values = {}
            for s, final in finals.items():
                value = final.get(split, {}).get(metric)
                if not is_number(value):
                    raise MemreadError(f"{row.id}: the {split} evaluation has no {metric!r} (it has "
                                       f"{', '.join(sorted(final.get(split, {})))}); nothing was recorded")
                values[s] = value * row.scale
            mean, std = _mean_std(list(values.values()))
            base = {"experiment": row.id, "dataset": row.dataset, "split": split, "metric": metric}
            line = {**base, "value": round(mean, 4)}
            if std is not None:
                line["std"] = round(std, 4)
            line.update({"paper_value": paper_value(metric, split), "commit": commit, "command": command,
                         "wall_s": round(wall, 1), "seeds": list(values),
                         "per_seed": [round(v, 4) for v in values.values()],
                         "budget": "; ".join(dict.fromkeys(budgets.values())) + note})
            lines.append(line)
            for s, value in values.items():
                run_dir = seed_dir(s)
                lines.append({**base, "value": round(value, 4), "paper_value": paper_value(metric, split),
                              "commit": commit,
                              "command": f"memread train {row.config} --run-dir {run_dir}{sets} --set train.seed={s}",
                              "wall_s": round(walls[s], 1), "seeds": [s], "seed": s, "budget": budgets[s] + note})
    append_lines(out_path, lines)
    log(f"{row.id}: appended {len(lines)} lines to {out_path}; refresh the table with "
        f"memread reproduce list --markdown > results/REPRODUCTION.md")
    return lines

