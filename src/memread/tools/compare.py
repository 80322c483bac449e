"""``memread compare``: paired significance tests between two models' results on the same split.

A criterion splits its statistics by **unit** (:attr:`memread.criteria.base.Loss.units`: an example, a
WikiQA question with its candidates, one row of a language-model segment), so any set of units, summed
and passed to the criterion's ``summarize``, gives that set's metrics. Two models evaluated on the same
split give two tables of unit statistics, row ``i`` of one and of the other measured on the same unit.
The tests resample units, never tokens or candidates within a unit:

- **paired permutation test** (sign flip, scipy's ``permutation_test`` with ``permutation_type =
  "samples"``): under the null hypothesis that the two models are exchangeable, swapping the two
  models' statistics of any unit leaves the distribution of ``metric(A) - metric(B)`` unchanged; the
  two-sided p-value is the share of swaps whose difference is at least as far from 0 as the observed
  one. For accuracy this is the randomisation form of McNemar's test; for perplexity it swaps whole
  segment rows (their NLL sums), the unit the evaluation reads.
- **paired bootstrap** (scipy's ``bootstrap`` with ``paired=True``, percentile interval): a confidence
  interval of the difference, units drawn with replacement, the same draw for both models.

With ``--seeds N`` (:func:`compare_seeds`) the two runs are folders of seeds (``ROOT/seed1`` ..), as
``memread reproduce`` trains them: the paired tests of each seed pair, the paired test of the seeds pooled
(each unit's statistics summed over the seeds), Welch's t-test of the seeds' values, and a bootstrap over seeds
and units together (:func:`seeds_and_units_test`); the last two see the variation from training itself, the
pooled test takes the trained models as given.

Both use the metric exactly as the criterion computes it (MAP as the mean of per-question AP, perplexity
as ``exp`` of the summed NLL over the summed tokens), so the observed difference is the one the two
runs' ``final.json`` files show.

**Runs of other data** (:func:`check_same_data`, before anything is evaluated): two language models (or translation
models) with different vocabularies are refused, since a perplexity counts the words a vocabulary leaves out as
``<unk>`` and theirs measure different events; any other difference of their ``[data]`` sections or vocabularies
(another min_count, more training stories) is named in the result (``data_differences``), its verdict and the line
for a person: the difference is then one of models and data together.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from memread.errors import MemreadError
from memread.tools.paired_stats import PairedResult, UnitTable, paired_test, pooled, seeds_and_units_test


def _recorded_task(cfg, run, data_root, tasks: dict):
    """The task (which loads the data) and criterion that score a run read from its unit record: built once for all
    the runs in ``tasks`` (a comparison's) that share the config outside ``[train]`` (seeds of one model), the
    vocabulary and the data root."""
    import json

    from memread.data.vocab import Vocab
    from memread.experiment import build_model, build_task
    from memread.training.units import file_sha256

    setup = {k: v for k, v in cfg.to_dict().items() if k != "train"}
    key = (json.dumps(setup, sort_keys=True, default=str), file_sha256(run / "vocab.json"), str(data_root))
    if key not in tasks:
        task = build_task(cfg, data_root, vocab=Vocab.load(run / "vocab.json"))
        tasks[key] = task, task.build_criterion(build_model(cfg, task))
    return tasks[key]


def in_example_order(table: UnitTable, batches) -> UnitTable:
    """``table``'s rows in the split's example order, where ``batches`` read separate texts one unit an example
    (:class:`memread.data.batching.Batches`, whose ``groups`` name each batch's examples): an evaluation in length
    buckets (``data.bucket``) reads the examples sorted by length, so without this two runs that differ in
    ``data.bucket`` would pair different examples. Units that are not examples (a WikiQA question with its
    candidates, a language-model row) stay in batch order."""
    groups = getattr(batches, "groups", None)
    if groups is None:
        return table
    order = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64)
    if len(order) != len(table):
        return table
    return UnitTable(table.keys, table.values[np.argsort(order, kind="stable")])


def _evaluate_units(run_dir: str, data_root, split: str, checkpoint: str, batch_size: int, device: str,
                    progress: bool, tasks: dict | None = None) -> tuple[UnitTable, object, int]:
    """One run's unit statistics on ``split``: (table, criterion, batch size used). From the run's unit record
    (:mod:`memread.training.units`) where it measured this checkpoint at this batch size and the run's precision,
    as it must where the checkpoint is not in the folder (a run trained on another machine); else evaluated, at
    the run's precision, as ``final.json`` was. Units that are examples come in the split's example order
    (:func:`in_example_order`). ``tasks``: the comparison's tasks and criteria of recorded runs so far
    (:func:`_recorded_task`)."""
    from pathlib import Path

    from memread.experiment import is_archive, load_trained, read_run_config
    from memread.training.loop import evaluate
    from memread.training.units import in_place_of, read_units, record_path, save_units

    run = Path(run_dir)
    if not is_archive(run) and (run / "config.json").is_file():
        cfg = read_run_config(run)
        recorded = read_units(run, split, checkpoint, batch_size or cfg.train.eval_batch_size or None,
                              cfg.train.precision)
        if recorded is not None:
            keys, values, meta = recorded
            task, criterion = _recorded_task(cfg, run, data_root, {} if tasks is None else tasks)
            table = in_example_order(UnitTable(keys, values), task.batches(split, meta["batch_size"]))
            return table, criterion, meta["batch_size"]
        if in_place_of(run, split, checkpoint):
            raise MemreadError(f"{run}: no checkpoint_{checkpoint}.pt here, and its {record_path(run, split).name} "
                               f"measured another checkpoint, batch size or precision: compare it at the record's "
                               f"(--checkpoint, --batch-size) or where its checkpoints are")
    cfg, task, model = load_trained(run, data_root, checkpoint, device)
    batch_size = batch_size or cfg.train.eval_batch_size or task.default_eval_batch_size
    criterion = task.build_criterion(model)
    units: list = []
    evaluate(model, task, split, batch_size, progress=progress, criterion=criterion, units=units,
             precision=cfg.train.precision)
    table = in_example_order(UnitTable.from_batches(units, type(criterion).__name__), task.batches(split, batch_size))
    # kept for the next comparison of a run without a record of its best checkpoint (one from before the records):
    # never over a current one (it may be at the batch size of the run's own evaluation)
    if not is_archive(run) and checkpoint == "best" and read_units(run, split, "best", None,
                                                                    cfg.train.precision) is None:
        try:
            save_units(run, split, units, checkpoint, batch_size, cfg.train.precision)
        except MemreadError:  # a folder we may not write to: the comparison stands without it
            pass
    return table, criterion, batch_size


def _batch_size_of(runs: list[str], split: str, checkpoint: str, batch_size: int) -> int:
    """The batch size the comparison evaluates at: ``batch_size`` if given; else the one of the unit record of a run
    whose checkpoint is not in its folder (it can be compared at that size only); else 0 (the first run's own)."""
    from pathlib import Path

    from memread.training.units import in_place_of, load_record, record_path

    if batch_size:
        return batch_size
    pinned = {str(run): load_record(record_path(run, split))[0].get("batch_size")
              for run in map(Path, runs) if in_place_of(run, split, checkpoint)}
    sizes = set(pinned.values())
    if len(sizes) > 1:
        raise MemreadError("runs without their checkpoints were recorded at different batch sizes ("
                           + ", ".join(f"{run}: {bs}" for run, bs in pinned.items()) + "): their units differ, so "
                           "they cannot be paired; evaluate them where their checkpoints are")
    return int(sizes.pop()) if sizes else 0


# [data] keys that cut the same examples into other batches, not other data: not a difference of data
BATCHING_KEYS = ("bptt", "bucket")
# criteria whose every metric is over the words of the vocabulary (a word it leaves out is <unk>, one event)
VOCABULARY_CRITERIA = ("lm_nll", "token_nll")


def _data_of(run: str) -> tuple[dict, str, int, str]:
    """A run's (or model archive's) [data] section, vocabulary fingerprint and size, and criterion name."""
    from pathlib import Path

    from memread.data.vocab import Vocab
    from memread.experiment import is_archive, read_run_config

    path = Path(run)
    if is_archive(path):
        from memread.inference.archive import archive_config

        cfg, vocab = archive_config(path)
    else:
        cfg, vocab = read_run_config(path), Vocab.load(path / "vocab.json")
    return dataclasses.asdict(cfg.data), vocab.fingerprint(), len(vocab), cfg.criterion.name


def check_same_data(run_a: str, run_b: str) -> list[str]:
    """What differs between two runs' data: their ``[data]`` values (``"data.min_count: 1 vs 2"``; not the
    :data:`BATCHING_KEYS`) and their vocabularies (``"vocabulary: 812 vs 790 words"``); [] for runs of the same
    data. Refuses, in one line, language or translation models of different vocabularies."""
    (da, fa, na, crit_a), (db, fb, nb, crit_b) = _data_of(run_a), _data_of(run_b)
    keys = list(da) + [k for k in db if k not in da]
    differ = [f"data.{k}: {da.get(k)!r} vs {db.get(k)!r}" for k in keys
              if k not in BATCHING_KEYS and da.get(k) != db.get(k)]
    if fa != fb:
        words = f"vocabulary: {na} vs {nb} words" if na != nb else f"vocabulary: {na} words each, not the same ones"
        if crit_a in VOCABULARY_CRITERIA or crit_b in VOCABULARY_CRITERIA:
            raise MemreadError(f"{run_a} and {run_b} have different vocabularies ({'; '.join([words] + differ)}): "
                               f"a perplexity counts the words its vocabulary leaves out as <unk>, so theirs measure "
                               f"different events and a paired test of them means nothing; compare runs trained "
                               f"with one vocabulary (memread eval gives each run its own number)")
        differ.append(words)
    return differ


def _with_differences(result: dict, differ: list[str]) -> dict:
    """``result`` saying that its runs' data differ (``data_differences``, and the verdict)."""
    if not differ:
        return result
    said = f"; but the runs were trained on different data ({'; '.join(differ)}): the difference is of models " \
           f"and data together"
    out = {**result, "data_differences": differ}
    if "verdict" in out:
        out["verdict"] += said
    if "pooled" in out:
        out["pooled"] = {**out["pooled"], "verdict": out["pooled"]["verdict"] + said}
    return out


def _same_criterion(a, b, name_a: str, name_b: str) -> None:
    if type(a) is not type(b):
        raise MemreadError(f"{name_a} is scored by {type(a).__name__} and {name_b} by {type(b).__name__}: a paired "
                           f"test needs the same task and criterion")


def compare_runs(run_a: str, run_b: str, data_root, split: str = "test", checkpoint: str = "best",
                 metric: str | None = None, batch_size: int = 0, device: str = "cpu", resamples: int = 10_000,
                 confidence: float = 0.95, seed: int = 0, progress: bool = False) -> dict:
    """Evaluate both runs on ``split`` (batches of the same size, so that their units are the same) and test
    the difference of ``metric`` (default: the criterion's selection metric). Returns the JSON-able result:
    ``run_a``, ``run_b``, ``seed_a``, ``seed_b`` (the seed each trained with), and :class:`PairedResult`'s fields
    (``a``, ``b``: the metric of each run); ``data_differences`` where their data differ (:func:`check_same_data`,
    which refuses language models of different vocabularies before anything is evaluated)."""
    differ = check_same_data(run_a, run_b)
    batch_size = _batch_size_of([run_a, run_b], split, checkpoint, batch_size)
    tasks: dict = {}
    ta, a, batch_size = _evaluate_units(run_a, data_root, split, checkpoint, batch_size, device, progress, tasks)
    tb, b, _ = _evaluate_units(run_b, data_root, split, checkpoint, batch_size, device, progress, tasks)
    _same_criterion(a, b, run_a, run_b)
    result = paired_test(ta, tb, a.summarize, metric or a.selection_metric, a.higher_is_better, resamples=resamples,
                         confidence=confidence, seed=seed, names=(run_a, run_b))
    return _with_differences({"run_a": run_a, "run_b": run_b, "split": split, "checkpoint": checkpoint,
                              "batch_size": batch_size, "seed_a": trained_seed(run_a), "seed_b": trained_seed(run_b),
                              **result.to_dict()}, differ)


def trained_seed(run: str) -> int:
    """The seed ``run`` trained with, from its config.json: a folder's name says where a run is, not how it
    trained."""
    from pathlib import Path

    from memread.experiment import read_run_config

    return read_run_config(Path(run)).train.seed


def compare_seeds(root_a: str, root_b: str, seeds: int, data_root, split: str = "test", checkpoint: str = "best",
                  metric: str | None = None, batch_size: int = 0, device: str = "cpu", resamples: int = 10_000,
                  confidence: float = 0.95, seed: int = 0, progress: bool = False) -> dict:
    """Two models each trained with seeds 1..``seeds``, in ``ROOT/seedS`` (as ``memread reproduce`` lays them
    out). Returns the JSON-able result:

    - ``per_seed``: the paired test of seed s of A against seed s of B, for each s;
    - ``pooled``: the paired test of the pooled tables (:func:`pooled`): the difference of the seeds' mean
      metric, units resampled (it tests the units' variation, not the seeds');
    - ``seeds``: the metric of every seed of each model, their means and sample standard deviations, and
      Welch's t-test of the two sets of seed values (scipy's ``ttest_ind``, ``equal_var=False``): the
      variation from training itself, which the papers do not report;
    - ``seeds_and_units``: :func:`seeds_and_units_test`, the pooled difference with the seeds and the units
      resampled together: whether the two training procedures differ, on units as the paired test reads them."""
    from pathlib import Path

    from scipy import stats

    if seeds < 2:
        raise MemreadError(f"--seeds {seeds}: at least 2 (one seed is a plain memread compare RUN_A RUN_B)")
    runs = {side: [str(Path(root) / f"seed{s}") for s in range(1, seeds + 1)] for side, root in (("a", root_a),
                                                                                                   ("b", root_b))}
    for run in runs["a"] + runs["b"]:
        if not Path(run).is_dir():
            raise MemreadError(f"{run}: no such run folder (--seeds {seeds} reads ROOT/seed1 .. ROOT/seed{seeds})")
    differ = list(dict.fromkeys(d for run in runs["a"][1:] + runs["b"] for d in check_same_data(runs["a"][0], run)))
    tables: dict[str, list[UnitTable]] = {"a": [], "b": []}
    criterion = None
    batch_size = _batch_size_of(runs["a"] + runs["b"], split, checkpoint, batch_size)
    tasks: dict = {}  # the recorded runs' tasks and criteria: one task built a model, not one a seed
    for side in ("a", "b"):
        for run in runs[side]:
            table, crit, batch_size = _evaluate_units(run, data_root, split, checkpoint, batch_size, device, progress,
                                                      tasks)
            if criterion is not None:
                _same_criterion(criterion, crit, runs["a"][0], run)
            criterion = criterion or crit
            tables[side].append(table)
    metric = metric or criterion.selection_metric
    trained = {side: [trained_seed(run) for run in runs[side]] for side in ("a", "b")}

    def test(ta: UnitTable, tb: UnitTable, names: tuple[str, str]) -> PairedResult:
        return paired_test(ta, tb, criterion.summarize, metric, criterion.higher_is_better, resamples=resamples,
                           confidence=confidence, seed=seed, names=names)

    per_seed = [{"seed": s, **test(ta, tb, (ra, rb)).to_dict()}
                for s, ta, tb, ra, rb in zip(range(1, seeds + 1), tables["a"], tables["b"], runs["a"], runs["b"])]
    pool = test(pooled(tables["a"]), pooled(tables["b"]), (root_a, root_b)).to_dict()
    both = seeds_and_units_test(tables["a"], tables["b"], criterion.summarize, metric, resamples=resamples,
                                confidence=confidence, seed=seed).to_dict()
    values = {side: [criterion.summarize(t.sums())[metric] for t in tables[side]] for side in ("a", "b")}
    welch = stats.ttest_ind(values["a"], values["b"], equal_var=False)
    summary = {side: {"values": values[side], "mean": float(np.mean(values[side])),
                      "std": float(np.std(values[side], ddof=1))} for side in ("a", "b")}
    return _with_differences({
        "root_a": root_a, "root_b": root_b, "split": split, "checkpoint": checkpoint, "batch_size": batch_size,
        "metric": metric, "higher_is_better": criterion.higher_is_better, "trained_seeds": trained,
        "seeds": {**summary, "difference": summary["a"]["mean"] - summary["b"]["mean"],
                  "welch_t": float(welch.statistic), "welch_p": float(welch.pvalue)},
        "pooled": pool, "seeds_and_units": both, "per_seed": per_seed}, differ)


def summary_text(result: dict) -> str:
    """One line for a person of :func:`compare_runs`' or :func:`compare_seeds`' result (the JSON is for programs):
    "map: A - B = -0.0144 [-0.0356, +0.0068], paired p = 0.182 (no significant difference); 3 seeds: A 0.6216 ±
    0.0073, B 0.6360 ± 0.0130, Welch p = 0.189, seeds & units p = 0.31 [-0.05, +0.02]"."""
    def num(x: float) -> str:
        return f"{x:+.4g}"

    if "pooled" not in result:
        return (f"{result['metric']}: A - B = {num(result['difference'])} [{num(result['ci_low'])}, "
                f"{num(result['ci_high'])}], paired p = {result['p_value']:.3g} ({result['verdict']})")
    pool, seeds, both = result["pooled"], result["seeds"], result["seeds_and_units"]
    side = {k: f"{seeds[k]['mean']:.4g} ± {seeds[k]['std']:.2g}" for k in ("a", "b")}
    return (f"{result['metric']}: A - B = {num(pool['difference'])} [{num(pool['ci_low'])}, {num(pool['ci_high'])}], "
            f"pooled paired p = {pool['p_value']:.3g} ({pool['verdict']}); {len(seeds['a']['values'])} seeds: "
            f"A {side['a']}, B {side['b']}, Welch p = {seeds['welch_p']:.3g}, seeds & units p = {both['p_value']:.3g} "
            f"[{num(both['ci_low'])}, {num(both['ci_high'])}]")


# why a run stopped (its checkpoint's loop state), as a budget says it
STOPS = {"early": "early stop", "epochs": "epoch cap", "max_minutes": "time limit", "max_steps": "step cap"}


def epochs_text(epochs: float) -> str:
    """Epochs to a tenth: half-epoch evaluations land on batch boundaries (4.49922 epochs reads "4.5")."""
    return f"{round(epochs, 1):g}"


def run_budget(run_dir) -> dict | None:
    """How a run's training ended, from its ``checkpoint_last.pt`` and ``metrics.jsonl``: ``stopped`` (the loop's
    reason), ``epochs`` (trained, at its last validation), ``best_epochs`` (of its best validation),
    ``improving``: stopped by a cap (epochs, steps, time) with its best validation the last one, better than the
    one before by the run's ``train.min_improvement`` (a smaller gain its own rule counts as none), so still
    improving when it stopped; and what it cost: ``tokens`` trained and ``train_s``, the wall seconds of its
    training over every resume (None where a checkpoint from before they were counted began it). A folder whose
    ``checkpoint_last.pt`` stayed on another machine answers from the loop state its unit record kept. None for
    a folder without either (a model archive)."""
    from pathlib import Path

    from memread.training.loop import valid_records
    from memread.training.units import run_loop

    run_dir = Path(run_dir)
    if not (run_dir / "metrics.jsonl").is_file():
        return None
    loop = run_loop(run_dir)  # a folder whose checkpoints stayed elsewhere: the loop state its unit record kept
    valid = valid_records(run_dir)
    if loop is None or not valid:
        return None
    best = [r for r in valid if r.get("best")]
    stopped = loop.get("stopped")
    return {"stopped": stopped, "epochs": valid[-1].get("epochs_done"),
            "best_epochs": best[-1].get("epochs_done") if best else None,
            "improving": stopped != "early" and bool(valid[-1].get("best")) and valid[-1].get("significant", True),
            "tokens": loop.get("tokens_trained"), "train_s": loop.get("seconds_trained"),
            "train_s_by_device": loop.get("seconds_by_device")}


def _budgets(runs_a: list, runs_b: list) -> dict[str, list[dict]] | None:
    """:func:`run_budget` of every run, by side ("A", "B"), each folder read once; None if a run has no record."""
    out = {name: [run_budget(run) for run in runs] for name, runs in (("A", runs_a), ("B", runs_b))}
    return None if any(b is None for side in out.values() for b in side) else out


def _cost(b: dict) -> dict:
    return {"tokens": b["tokens"], "train_s": None if b["train_s"] is None else round(b["train_s"], 1),
            # a run that crossed devices: its seconds on each (they are not alike: a GPU's minute is not a CPU core's)
            **({"train_s_by_device": {k: round(v, 1) for k, v in b["train_s_by_device"].items()}}
               if len(b.get("train_s_by_device") or {}) > 1 else {})}


def _ending(b: dict) -> str:
    how = STOPS.get(b["stopped"], f"stopped: {b['stopped'] or 'not finished'}")
    if b["epochs"] is None or b["best_epochs"] is None:
        return how
    return f"{how} at {epochs_text(b['epochs'])} epochs (best {epochs_text(b['best_epochs'])})"


def ending_fields(runs_a: list, runs_b: list) -> dict | None:
    """What a comparison's results line says of how its runs ended, each run read once: ``budget`` (each run of A
    and of B as "early stop at 5.5 epochs (best 0.5)", like runs in a row once, "x3"), ``converged`` (no run still
    ``improving`` when a cap stopped it), ``cost`` (each run's tokens and training seconds, seed by seed: ``{"a":
    [...], "b": [...]}``) and, where not converged, ``still_improving`` (the sides with such a run). None if a run
    has no record of how it ended (an archive)."""
    budgets = _budgets(runs_a, runs_b)
    if budgets is None:
        return None
    sides = []
    for name, side in budgets.items():
        same = [(text, len(list(run))) for text, run in itertools.groupby(map(_ending, side))]  # like seeds: "x3"
        sides.append(f"{name}: {', '.join(text if n == 1 else f'{text} x{n}' for text, n in same)}")
    improving = [name for name, side in budgets.items() if any(b["improving"] for b in side)]
    out = {"budget": "; ".join(sides), "converged": not improving,
           "cost": {name.lower(): [_cost(b) for b in side] for name, side in budgets.items()}}
    return {**out, "still_improving": improving} if improving else out
