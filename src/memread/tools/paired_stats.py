"""The statistics of ``memread compare`` (:mod:`memread.tools.compare`), apart from the evaluation of runs.

A :class:`UnitTable` holds two models' statistics by **unit** (an example, a WikiQA question with its candidates,
one row of a language-model segment or one sentence), as a criterion's ``Loss.units`` splits them; any set of
units, summed and passed to the criterion's ``summarize``, gives that set's metrics. :func:`paired_test` is the
paired permutation test (sign flip) and the paired bootstrap interval of ``metric(A) - metric(B)`` over units;
:func:`pooled` sums seeds' tables unit by unit; :func:`seeds_and_units_test` resamples seeds and units together.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from memread.errors import MemreadError

Summarize = Callable[[dict[str, float]], dict[str, float]]


@dataclass
class UnitTable:
    """The unit statistics of one evaluation: ``values`` (U, K), column ``j`` is statistic ``keys[j]``."""

    keys: tuple[str, ...]
    values: np.ndarray

    @classmethod
    def from_batches(cls, batches: list[dict[str, np.ndarray] | None], criterion: str = "the criterion") -> "UnitTable":
        """Concatenate per-batch ``{key: (U_b,)}`` tables, in batch order (keys that only some batches
        have, such as bAbI's per-task counts, are 0 in the others)."""
        from memread.training.units import unit_matrix

        return cls(*unit_matrix(batches, criterion))

    def __len__(self) -> int:
        return len(self.values)

    def sums(self, rows: np.ndarray | slice = slice(None)) -> dict[str, float]:
        return dict(zip(self.keys, self.values[rows].sum(axis=0).tolist()))


@dataclass
class PairedResult:
    metric: str
    a: float  # the metric of model A on all units
    b: float
    difference: float  # a - b
    ci_low: float  # paired bootstrap confidence interval of a - b
    ci_high: float
    confidence: float
    p_value: float  # two-sided, paired permutation
    units: int
    resamples: int
    higher_is_better: bool

    @property
    def better(self) -> str:
        """Which model the observed difference favours ("A", "B" or "tie")."""
        if self.difference == 0:
            return "tie"
        return "A" if (self.difference > 0) == self.higher_is_better else "B"

    def verdict(self, alpha: float = 0.05) -> str:
        if self.p_value < alpha:
            return f"{self.better} is better (p = {self.p_value:.3g} < {alpha})"
        return f"no significant difference (p = {self.p_value:.3g} >= {alpha})"

    def to_dict(self) -> dict:
        return {**asdict(self), "better": self.better, "verdict": self.verdict()}


# statistics that say how much a unit holds (tokens, examples, candidates, questions): equal for both
# models when they read the same split
SIZE_KEYS = ("tokens", "count", "questions")


def check_paired(a: UnitTable, b: UnitTable, names: tuple[str, str] = ("A", "B")) -> None:
    """Refuse tables that are not of the same units in the same order."""
    if a.keys != b.keys:
        raise MemreadError(f"{names[0]} and {names[1]} report different statistics ({', '.join(a.keys)} vs "
                           f"{', '.join(b.keys)}): not the same task and criterion")
    if len(a) != len(b):
        raise MemreadError(f"{names[0]} has {len(a)} units and {names[1]} {len(b)}: not the same split, or "
                           f"evaluated with different batch sizes (pass the same --batch-size to both)")
    for key in SIZE_KEYS + tuple(k for k in a.keys if k.startswith("count_g")):
        if key in a.keys:
            j = a.keys.index(key)
            differ = np.flatnonzero(a.values[:, j] != b.values[:, j])
            if len(differ):
                raise MemreadError(f"unit {differ[0]} holds {a.values[differ[0], j]:g} {key} in {names[0]} and "
                                   f"{b.values[differ[0], j]:g} in {names[1]}: the units are not the same "
                                   f"(another split, data or batching)")


BATCH_CELLS = 10_000_000  # the counts a batch of :func:`paired_test`'s resamples holds at once


def _counts(picks: np.ndarray, size: int) -> np.ndarray:
    """How often each row of ``picks`` ``(n, m)`` picks each of ``size`` items, as counts ``(n, size)`` (float)."""
    n = len(picks)
    counts = np.bincount((picks + size * np.arange(n)[:, None]).ravel(), minlength=n * size)
    return counts.reshape(n, size).astype(np.float64)


def paired_test(a: UnitTable, b: UnitTable, summarize: Summarize, metric: str, higher_is_better: bool,
                resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
                names: tuple[str, str] = ("A", "B")) -> PairedResult:
    """Paired permutation p-value and paired bootstrap interval of ``metric(a) - metric(b)``."""
    from scipy import stats

    check_paired(a, b, names)
    if metric not in summarize(a.sums()):
        raise MemreadError(f"no metric {metric!r}; this criterion reports {', '.join(summarize(a.sums()))}")
    if len(a) < 2:
        raise MemreadError(f"{len(a)} unit(s): a paired test needs at least 2")
    # the units' statistics side by side: unit i of A is row i, of B row U + i; a sample is a vector of row
    # indices, so swapping a pair swaps whole rows of statistics between the models
    table = np.concatenate([a.values, b.values])
    U = len(a)

    def value(rows: np.ndarray) -> np.ndarray:  # rows (..., U) -> the metric of each resample (...)
        # each resample's totals: how often it draws each row, times the rows (no (n, U, K) gather)
        totals = _counts(rows.reshape(-1, U), 2 * U) @ table  # (n, K)
        out = np.array([summarize(dict(zip(a.keys, t.tolist())))[metric] for t in totals])
        return out.reshape(rows.shape[:-1])

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        x, y = np.moveaxis(x, axis, -1), np.moveaxis(y, axis, -1)
        return value(x) - value(y)

    ia, ib = np.arange(U), np.arange(U) + U
    observed = float(difference(ia, ib))
    rng = np.random.default_rng(seed)
    # resamples a batch: at most BATCH_CELLS counts (80 MB as integers, as much again as floats). scipy's paired
    # permutations loop over the units in Python once a batch (~11 us a unit), so the batch is as large as that
    # allows (at bAbI's 20,000 units, 250); a divisor of `resamples`, since a last short batch would still draw a
    # whole batch of permutations and shift the bootstrap's draws: the result depends on the seed alone. Where
    # `resamples` has no divisor near the cap (a prime), the cap, and the result depends on it too
    cap = min(max(1, BATCH_CELLS // (2 * U)), resamples)
    batch = next(d for d in range(cap, 0, -1) if resamples % d == 0)
    batch = batch if 2 * batch >= cap else cap
    perm = stats.permutation_test((ia, ib), difference, permutation_type="samples", vectorized=True,
                                  n_resamples=resamples, alternative="two-sided", random_state=rng, batch=batch)
    boot = stats.bootstrap((ia, ib), difference, paired=True, vectorized=True, n_resamples=resamples,
                           confidence_level=confidence, method="percentile", random_state=rng, batch=batch)
    low, high = boot.confidence_interval
    return PairedResult(metric, float(value(ia)), float(value(ib)), observed, float(low), float(high), confidence,
                        float(perm.pvalue), U, resamples, higher_is_better)


def pooled(tables: list[UnitTable]) -> UnitTable:
    """Several evaluations of the same units (one model trained with several seeds) as one table: each unit's
    statistics summed over them, so the metric of the pooled table is the seeds' metric on all their
    predictions together (for accuracy and MAP the mean over seeds)."""
    first = tables[0]
    for i, t in enumerate(tables[1:], 2):
        check_paired(first, t, ("seed 1", f"seed {i}"))
    return UnitTable(first.keys, np.sum([t.values for t in tables], axis=0))


@dataclass
class SeedsUnitsResult:
    """The two-level bootstrap of :func:`seeds_and_units_test`: the pooled difference, its interval and p-value."""

    metric: str
    difference: float  # metric(A's seeds pooled) - metric(B's seeds pooled), as the pooled paired test's
    ci_low: float
    ci_high: float
    confidence: float
    p_value: float  # two-sided: twice the smaller share of resampled differences on either side of 0
    seeds_a: int
    seeds_b: int
    units: int
    resamples: int

    def to_dict(self) -> dict:
        return asdict(self)


def _draw_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``n`` draws of ``size`` items with replacement from ``size``, as counts ``(n, size)`` (float)."""
    return _counts(rng.integers(size, size=(n, size)), size)


def seeds_and_units_test(tables_a: list[UnitTable], tables_b: list[UnitTable], summarize: Summarize, metric: str,
                         resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> SeedsUnitsResult:
    """A hierarchical (two-level) bootstrap of ``metric(A) - metric(B)`` over the seeds of each model and the test
    units: each resample draws A's seeds with replacement, B's seeds with replacement (independently: seed s of
    one model shares nothing with seed s of the other but a number), and the units with replacement (one draw for
    every run: the units stay paired), and pools the drawn seeds' statistics on the drawn units (a seed or unit
    drawn twice counts twice). Where the pooled paired test (:func:`paired_test` of :func:`pooled` tables) takes
    the trained models as given and asks whether they differ on this test set, this asks whether the two
    *training procedures* differ: the spread between seeds enters the interval. With few seeds it is crude (the
    bootstrap's variance over ``n`` seeds is ``(n - 1) / n`` of the seeds' own; 3 seeds give 10 distinct draws),
    so it reads beside the per-seed Welch test, not instead of it. It is conservative where the pooled test is not:
    with two runs of one procedure whose seeds differ (a test simulates 60 pairs of 3 seeds), the pooled test finds
    a difference at 5 % in about a quarter of them, this in a few percent.

    Percentile interval; the two-sided p-value is twice the smaller share of resampled differences at or beyond 0
    on either side (each share counted as ``(k + 1) / (resamples + 1)``), at most 1."""
    for name, tables in (("A", tables_a), ("B", tables_b)):
        if len(tables) < 2:
            raise MemreadError(f"{name} has {len(tables)} seed(s): a bootstrap over seeds needs at least 2 of each")
        for i, t in enumerate(tables[1:], 2):
            check_paired(tables[0], t, (f"{name} seed 1", f"{name} seed {i}"))
    check_paired(tables_a[0], tables_b[0], ("A", "B"))
    if metric not in summarize(tables_a[0].sums()):
        raise MemreadError(f"no metric {metric!r}; this criterion reports {', '.join(summarize(tables_a[0].sums()))}")
    A = np.stack([t.values for t in tables_a]).astype(np.float64)  # (n_A, U, K)
    B = np.stack([t.values for t in tables_b]).astype(np.float64)
    U, keys = A.shape[1], tables_a[0].keys
    rng = np.random.default_rng(seed)

    def metric_of(totals: np.ndarray) -> np.ndarray:  # (R, K) -> (R,)
        return np.array([summarize(dict(zip(keys, t.tolist())))[metric] for t in totals])

    observed = float(metric_of(A.sum(axis=(0, 1))[None])[0] - metric_of(B.sum(axis=(0, 1))[None])[0])
    diffs = []
    chunk = max(1, min(resamples, 10_000_000 // U))  # resamples a chunk: ~160 MB of draws
    for start in range(0, resamples, chunk):
        n = min(chunk, resamples - start)
        units = _draw_counts(rng, n, U)  # (n, U): how often each resample draws each unit
        sides = []
        for T in (A, B):
            picks = _draw_counts(rng, n, len(T))  # (n, seeds): how often each resample draws each seed
            totals = sum(picks[:, s, None] * (units @ T[s]) for s in range(len(T)))  # (n, K)
            sides.append(metric_of(totals))
        diffs.append(sides[0] - sides[1])
    d = np.concatenate(diffs)
    alpha = 1.0 - confidence
    low, high = np.quantile(d, [alpha / 2, 1 - alpha / 2])
    below, above = (np.sum(d <= 0) + 1) / (resamples + 1), (np.sum(d >= 0) + 1) / (resamples + 1)
    p_value = float(min(1.0, 2 * min(below, above)))
    return SeedsUnitsResult(metric, observed, float(low), float(high), confidence, p_value, len(A), len(B), U,
                            resamples)
