"""Paired significance tests (memread.tools.compare, ``memread compare``): every criterion splits its
statistics into units that add up to them, and the tests resample those units."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
import torch

from conftest import Fresh, subprocess_env, tiny_config
from memread.criteria.answer_selection import AnswerSelection
from memread.criteria.classification import CrossEntropy
from memread.criteria.cloze import ClozeNLL, ClozeNLLConfig
from memread.criteria.document import RatingCriterion
from memread.criteria.lm import LMNLL, LMNLLConfig
from memread.criteria.translation import TokenNLL
from memread.errors import MemreadError
from memread.heads.base import ModelOutput
from memread.tools import compare
from memread.tools import paired_stats
from memread.tools.paired_stats import UnitTable, paired_test, pooled, seeds_and_units_test


def _cases():
    g = torch.Generator().manual_seed(0)
    B, T, V, C = 5, 7, 11, 4
    mask = torch.arange(T) < torch.tensor([7, 7, 3, 0, 5]).unsqueeze(1)  # a row with no token at all
    lm = (LMNLL(LMNLLConfig()), ModelOutput(logits=torch.randn(B, T, V, generator=g)),
          {"target": torch.randint(V, (B, T), generator=g), "mask": mask})
    mt = (TokenNLL(), ModelOutput(logits=torch.randn(B, T, V, generator=g)),
          {"tgt_out": torch.randint(V, (B, T), generator=g), "tgt_mask": mask})
    labels = torch.randint(C, (B,), generator=g)
    cls = (CrossEntropy(), ModelOutput(logits=torch.randn(B, C, generator=g)), {"label": labels})
    rating = (RatingCriterion([1.0, 2.0, 4.0, 5.0]), ModelOutput(logits=torch.randn(B, C, generator=g)), {"label": labels})
    cloze = (ClozeNLL(ClozeNLLConfig(normalize="candidates"), ["qa1", "qa2", "qa3"]),  # logits only: renormalised
             ModelOutput(logits=torch.randn(B, C, generator=g).log_softmax(-1)),
             {"answer": labels, "group": torch.tensor([0, 2, 2, 0, 2])})
    # WikiQA: 9 candidates of 3 questions (the middle one has no correct candidate: filtered out of MAP)
    question = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    wikiqa = (AnswerSelection(), ModelOutput(logits=torch.randn(9, generator=g)),
              {"label": torch.tensor([0, 1, 0, 0, 0, 1, 0, 1, 0]), "question": question})
    return {"lm": lm, "translation": mt, "classification": cls, "rating": rating, "cloze": cloze, "wikiqa": wikiqa}


@pytest.mark.parametrize("name", list(_cases()))
def test_each_criterions_units_add_up_to_its_batch_statistics(name):
    criterion, out, batch = _cases()[name]
    loss = criterion(out, batch)
    assert loss.units, f"{name}: no unit statistics"
    lengths = {len(v) for v in loss.units.values()}
    assert len(lengths) == 1  # one value per unit for every statistic
    for key, total in loss.stats.items():
        assert float(loss.units[key].sum()) == pytest.approx(float(total), rel=1e-6, abs=1e-6), key
    # the split's metrics, from the units, are the criterion's
    table = UnitTable.from_batches([{k: v.double().numpy() for k, v in loss.units.items()}])
    expected = criterion.summarize({k: float(v) for k, v in loss.stats.items()})
    assert criterion.summarize(table.sums()) == pytest.approx(expected)
    if name == "wikiqa":
        assert lengths == {3} and loss.units["questions"].tolist() == [1.0, 0.0, 1.0]


def _accuracy_table(hits) -> UnitTable:
    hits = np.asarray(hits, dtype=float)
    return UnitTable(("correct", "count"), np.stack([hits, np.ones_like(hits)], axis=1))


def accuracy(sums):
    return {"accuracy": sums["correct"] / sums["count"]}


def test_the_permutation_p_value_is_the_exact_sign_flip_test_when_every_flip_is_drawn():
    a = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    b = [0, 1, 0, 0, 1, 0, 1, 0, 1, 0]
    r = paired_test(_accuracy_table(a), _accuracy_table(b), accuracy, "accuracy", True, resamples=5000)
    # by hand: every one of the 2^10 swaps of the pairs, |difference| >= the observed 0.4
    diffs = [sum((x if s else y) - (y if s else x) for x, y, s in zip(a, b, flips)) / 10
             for flips in itertools.product([True, False], repeat=10)]
    exact = sum(abs(d) >= 0.4 - 1e-12 for d in diffs) / len(diffs)
    assert r.difference == pytest.approx(0.4) and r.a == 0.8 and r.b == 0.4
    assert r.p_value == pytest.approx(exact)  # 2^10 < resamples: scipy enumerates every swap
    assert r.better == "A" and r.ci_low <= 0.4 <= r.ci_high


def test_a_clear_difference_is_significant_and_none_is_not():
    rng = np.random.default_rng(1)
    b = rng.random(400) < 0.6
    a = b | (rng.random(400) < 0.3)  # A right wherever B is, and on a third of the rest
    r = paired_test(_accuracy_table(a), _accuracy_table(b), accuracy, "accuracy", True, resamples=2000)
    assert r.p_value < 0.001 and r.ci_low > 0 and "A is better" in r.verdict()
    same = paired_test(_accuracy_table(b), _accuracy_table(b), accuracy, "accuracy", True, resamples=2000)
    assert same.difference == 0 and same.p_value == 1.0 and same.better == "tie"
    assert same.verdict().startswith("no significant difference")


def test_the_paired_test_depends_on_its_seed_alone_not_on_how_many_resamples_a_batch_holds(monkeypatch):
    rng = np.random.default_rng(3)
    a, b = _accuracy_table(rng.random(300) < 0.6), _accuracy_table(rng.random(300) < 0.55)
    whole = paired_test(a, b, accuracy, "accuracy", True, resamples=700)  # one batch of 700
    monkeypatch.setattr(paired_stats, "BATCH_CELLS", 2 * 300 * 300)  # at most 300 a batch: 700 = 4 x 175
    batched = paired_test(a, b, accuracy, "accuracy", True, resamples=700)
    assert batched == whole and whole.ci_low < whole.difference < whole.ci_high
    batches = []  # and where the resamples have no divisor near the cap (701 is prime), batches of the cap
    permutation_test = scipy.stats.permutation_test
    monkeypatch.setattr(scipy.stats, "permutation_test", lambda *args, **kw: batches.append(kw["batch"])
                        or permutation_test(*args, **kw))
    for resamples in (700, 701):
        paired_test(a, b, accuracy, "accuracy", True, resamples=resamples)
    assert batches == [175, 300]


def test_perplexity_is_tested_on_whole_units_and_lower_is_better():
    rng = np.random.default_rng(2)
    tokens = rng.integers(1, 36, size=300).astype(float)
    nll_b = tokens * 5.0 + rng.normal(0, 3, size=300)
    nll_a = nll_b - tokens * 0.05  # A: 5 % lower per-token NLL on every row
    ppl = LMNLL(LMNLLConfig()).summarize
    A = UnitTable(("nll", "tokens"), np.stack([nll_a, tokens], 1))
    B = UnitTable(("nll", "tokens"), np.stack([nll_b, tokens], 1))
    r = paired_test(A, B, ppl, "ppl", False, resamples=2000)
    assert r.a == pytest.approx(np.exp(nll_a.sum() / tokens.sum())) and r.difference < 0
    assert r.better == "A" and r.p_value < 0.001 and r.ci_high < 0


def test_pooled_seeds_give_the_mean_accuracy_and_refuse_other_units():
    seeds = [_accuracy_table(v) for v in ([1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 0])]
    pool = pooled(seeds)
    assert accuracy(pool.sums())["accuracy"] == pytest.approx(np.mean([0.5, 0.5, 0.75]))
    assert pool.values[:, pool.keys.index("correct")].tolist() == [3, 2, 2, 0]
    with pytest.raises(MemreadError, match="seed 2"):
        pooled([seeds[0], _accuracy_table([1, 0, 1])])


def test_the_seeds_and_units_bootstrap_draws_seeds_by_their_share():
    """One unit, so only the seeds are drawn: A's two seeds got it right and wrong, B's both wrong. A draws both
    seeds right (1/4), one of each (1/2) or both wrong (1/4): a difference <= 0 a quarter of the time, p = 0.5."""
    a = [_accuracy_table([1]), _accuracy_table([0])]
    b = [_accuracy_table([0]), _accuracy_table([0])]
    r = seeds_and_units_test(a, b, accuracy, "accuracy", resamples=20_000)
    assert r.difference == pytest.approx(0.5) and r.p_value == pytest.approx(0.5, abs=0.02)
    assert (r.ci_low, r.ci_high) == (0.0, 1.0) and (r.seeds_a, r.seeds_b, r.units) == (2, 2, 1)


def test_the_seeds_and_units_bootstrap_sees_the_spread_between_seeds_that_the_pooled_test_does_not():
    rng = np.random.default_rng(3)
    U = 2000

    def seed(p: float) -> UnitTable:
        return _accuracy_table(rng.random(U) < p)

    # A's seeds spread from 0.5 to 0.9 (mean 0.7), B's sit at 0.65: on the units, the pooled A is clearly ahead
    a, b = [seed(0.5), seed(0.7), seed(0.9)], [seed(0.64), seed(0.65), seed(0.66)]
    pool = paired_test(pooled(a), pooled(b), accuracy, "accuracy", True, resamples=2000)
    both = seeds_and_units_test(a, b, accuracy, "accuracy", resamples=2000)
    assert both.difference == pytest.approx(pool.difference) and pool.p_value < 0.01
    assert both.p_value > 0.2 and both.ci_low < 0 < both.ci_high and both.ci_high - both.ci_low > 0.15
    # seeds alike (the same table thrice): only the units vary, as in the paired bootstrap of the pooled tables
    same_a, same_b = [a[1]] * 3, [b[1]] * 3
    pool = paired_test(pooled(same_a), pooled(same_b), accuracy, "accuracy", True, resamples=4000)
    both = seeds_and_units_test(same_a, same_b, accuracy, "accuracy", resamples=4000)
    assert both.difference == pytest.approx(pool.difference) and both.p_value < 0.01
    assert both.ci_low == pytest.approx(pool.ci_low, abs=0.006)
    assert both.ci_high == pytest.approx(pool.ci_high, abs=0.006)
    with pytest.raises(MemreadError, match="A has 1 seed"):
        seeds_and_units_test(a[:1], b, accuracy, "accuracy")
    with pytest.raises(MemreadError, match="B seed 1 has 2000 units and B seed 2 2"):
        seeds_and_units_test(a, [b[0], _accuracy_table([1, 0])], accuracy, "accuracy")
    with pytest.raises(MemreadError, match="no metric 'map'"):
        seeds_and_units_test(a, b, accuracy, "map")


def test_one_procedure_trained_twice_differs_by_the_pooled_test_far_more_often_than_by_seeds_and_units():
    """The null the claims ask about: A and B are one training procedure whose seeds shift a model's skill (logistic
    units of spread difficulty, each seed's skill N(0, 0.15)). 60 such pairs of 3 seeds each: the pooled paired test
    calls a difference in about a quarter of them at 5 % (it asks about these models), the bootstrap over seeds and
    units in at most 8 % (it asks about the procedure; conservative)."""
    rng = np.random.default_rng(0)
    U = 400
    difficulty = rng.normal(0, 1.5, U)

    def seed() -> UnitTable:
        p = 1 / (1 + np.exp(-(difficulty + rng.normal(0, 0.15))))
        return _accuracy_table(rng.random(U) < p)

    pooled_calls = both_calls = 0
    for _ in range(60):
        a, b = [seed() for _ in range(3)], [seed() for _ in range(3)]
        pooled_calls += paired_test(pooled(a), pooled(b), accuracy, "accuracy", True, resamples=400).p_value < 0.05
        both_calls += seeds_and_units_test(a, b, accuracy, "accuracy", resamples=400).p_value < 0.05
    assert pooled_calls >= 9 and both_calls <= 5


def test_tables_of_different_units_are_refused():
    a = _accuracy_table([1, 0, 1])
    with pytest.raises(MemreadError, match="3 units and B 2"):
        paired_test(a, _accuracy_table([1, 0]), accuracy, "accuracy", True)
    lm = UnitTable(("nll", "tokens"), np.array([[3.0, 2.0], [4.0, 3.0]]))
    other = UnitTable(("nll", "tokens"), np.array([[3.0, 2.0], [4.0, 4.0]]))
    with pytest.raises(MemreadError, match="unit 1 holds 3 tokens in A and 4 in B"):
        paired_test(lm, other, LMNLL(LMNLLConfig()).summarize, "ppl", False)
    with pytest.raises(MemreadError, match="different statistics"):
        paired_test(a, lm, accuracy, "accuracy", True)
    with pytest.raises(MemreadError, match="no metric 'map'"):
        paired_test(a, a, accuracy, "map", True)


def _memread(*args, data_root):
    return subprocess.run([sys.executable, "-m", "memread", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=subprocess_env(MEMREAD_DATA=str(data_root)))


def _wikiqa_config(folder, file: str, seed: int, encoder: str = "attention"):
    """A tiny WikiQA pair model (six steps) with ``seed``."""
    return tiny_config(folder, file, data={"name": "wikiqa", "vectors": "glove/tiny.txt"},
                       head={"name": "pair", "encoder": encoder, "emb": 8, "mlp": 8}, reader={"hidden": 8},
                       train=Fresh(max_steps=6, batch_size=4, progress=False, seed=seed))


def _two_wikiqa_runs(tmp_path, fixtures) -> list:
    """Two tiny WikiQA runs (seeds 1 and 2, six steps each): run1, run2."""
    runs = []
    for seed in (1, 2):
        cfg = _wikiqa_config(tmp_path, f"exp{seed}.toml", seed)
        run = tmp_path / f"run{seed}"
        r = _memread("train", cfg, "--run-dir", run, data_root=fixtures)
        assert r.returncode == 0, r.stderr
        runs.append(run)
    return runs


@pytest.mark.slow
def test_memread_compare_two_wikiqa_runs(tmp_path, fixtures):
    runs = _two_wikiqa_runs(tmp_path, fixtures)
    r = _memread("compare", *runs, "--resamples", "500", data_root=fixtures)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    finals = [json.loads((run / "final.json").read_text())["test"] for run in runs]
    assert got["metric"] == "map" and got["units"] >= finals[0]["questions"]  # filtered-out questions are units too
    assert got["a"] == pytest.approx(finals[0]["map"]) and got["b"] == pytest.approx(finals[1]["map"])
    assert (got["run_a"], got["run_b"]) == tuple(map(str, runs))
    assert got["difference"] == pytest.approx(finals[0]["map"] - finals[1]["map"]) and 0 < got["p_value"] <= 1
    said = f"map: A - B = {got['difference']:+.4g} [{got['ci_low']:+.4g}, {got['ci_high']:+.4g}], paired p = "
    assert said in r.stderr  # and one line for a person
    r = _memread("compare", runs[0], runs[0], "--metric", "mrr", "--resamples", "200", data_root=fixtures)
    same = json.loads(r.stdout.strip().splitlines()[-1])
    assert same["difference"] == 0 and same["p_value"] == 1.0 and same["a"] == pytest.approx(finals[0]["mrr"])
    r = _memread("compare", runs[0], runs[1], "--metric", "bleu", data_root=fixtures)
    assert r.returncode == 2 and "no metric 'bleu'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_memread_compare_seeds_of_two_models(tmp_path, fixtures, monkeypatch):
    """``--seeds 2``: ROOT/seed1, ROOT/seed2 of two models (attention and siamese pair encoders): per-seed tests equal to
    plain ``memread compare`` of the pairs, the pooled test's a and b the seeds' means, Welch over seeds."""
    finals = {}
    for model, encoder in (("lstm", "attention"), ("siamese", "siamese")):
        for seed in (1, 2):
            cfg = _wikiqa_config(tmp_path, f"{model}{seed}.toml", seed, encoder)
            run = tmp_path / model / f"seed{seed}"
            r = _memread("train", cfg, "--run-dir", run, data_root=fixtures)
            assert r.returncode == 0, r.stderr
            finals[model, seed] = json.loads((run / "final.json").read_text())["test"]["map"]
    r = _memread("compare", tmp_path / "lstm", tmp_path / "siamese", "--seeds", "2", "--resamples", "300",
                 data_root=fixtures)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["metric"] == "map"
    assert got["seeds"]["a"]["values"] == pytest.approx([finals["lstm", 1], finals["lstm", 2]])
    assert got["seeds"]["b"]["mean"] == pytest.approx((finals["siamese", 1] + finals["siamese", 2]) / 2)
    # MAP pooled over seeds: each question's AP summed over the seeds, so the mean of the seeds' MAPs
    assert got["pooled"]["a"] == pytest.approx(got["seeds"]["a"]["mean"])
    assert got["pooled"]["b"] == pytest.approx(got["seeds"]["b"]["mean"])
    # seeds and units resampled together: the same pooled difference, its own interval and p
    both = got["seeds_and_units"]
    assert both["difference"] == pytest.approx(got["pooled"]["difference"]) and 0 < both["p_value"] <= 1
    assert both["ci_low"] <= both["ci_high"] and (both["seeds_a"], both["seeds_b"]) == (2, 2)
    one = _memread("compare", tmp_path / "lstm" / "seed2", tmp_path / "siamese" / "seed2", "--resamples", "300",
                   data_root=fixtures)
    plain = json.loads(one.stdout.strip().splitlines()[-1])
    assert got["per_seed"][1]["p_value"] == plain["p_value"] and got["per_seed"][1]["a"] == plain["a"]
    # one run a side recorded: the seed each trained with (from its config.json, not its folder's name)
    (tmp_path / "lstm" / "seed2").rename(tmp_path / "lstm" / "second")
    for a, seeds in (("second", [2]), ("seed1", {"a": [1], "b": [2]})):
        single = tmp_path / f"single-{a}.jsonl"
        r = _memread("compare", tmp_path / "lstm" / a, tmp_path / "siamese" / "seed2", "--resamples", "300",
                     "--record", "one-seed", "--results", single, data_root=fixtures)
        assert r.returncode == 0, r.stderr
        assert json.loads(single.read_text())["seeds"] == seeds
    (tmp_path / "lstm" / "second").rename(tmp_path / "lstm" / "seed2")
    assert 0 <= got["seeds"]["welch_p"] <= 1 or got["seeds"]["welch_p"] != got["seeds"]["welch_p"]  # NaN if no spread
    results = tmp_path / "results.jsonl"
    r = _memread("compare", tmp_path / "lstm", tmp_path / "siamese", "--seeds", "2", "--resamples", "300",
                 "--record", "wikiqa-attention-vs-siamese", "--results", results, data_root=fixtures)
    assert r.returncode == 0, r.stderr
    rec = json.loads(results.read_text())
    assert rec["experiment"] == "wikiqa-attention-vs-siamese" and rec["metric"] == "map_difference"
    assert rec["dataset"] == "wikiqa" and rec["split"] == "test" and rec["seeds"] == [1, 2]
    assert rec["value"] == pytest.approx(got["seeds"]["difference"], abs=1e-6)
    assert rec["pooled_p_value"] == pytest.approx(got["pooled"]["p_value"], abs=1e-6)
    assert rec["seeds_units_p_value"] == pytest.approx(both["p_value"], abs=1e-6)
    said = r.stderr.splitlines()[0]  # and one line for a person
    assert said.startswith(f"map: A - B = {got['pooled']['difference']:+.4g} [") and "2 seeds: A " in said
    assert f"seeds & units p = {both['p_value']:.3g} [" in said and f"Welch p = {got['seeds']['welch_p']:.3g}" in said
    assert rec["seeds_units_ci_95"] == pytest.approx([both["ci_low"], both["ci_high"]], abs=1e-6)
    assert rec["command"].startswith("memread compare ") and "--seeds 2" in rec["command"]
    # how each run ended: its 6-step cap, after two epochs of three steps (whether it converged: the test below)
    assert rec["budget"].count("step cap at 2 epochs (best ") in (2, 3, 4) and rec["budget"].startswith("A: ")
    assert isinstance(rec["converged"], bool) and rec["higher_is_better"] is True  # MAP
    # where a run was still improving: which sides (the verdict is settled if only the leader is; claims.py)
    from memread.tools.compare import ending_fields

    sides = ending_fields(*[[tmp_path / m / f"seed{s}" for s in (1, 2)] for m in ("lstm", "siamese")]).get(
        "still_improving", [])
    assert rec["converged"] == (not sides) and rec.get("still_improving") == (sides or None)
    # what each seed's run cost: its tokens and training seconds
    assert [len(rec["cost"][side]) for side in ("a", "b")] == [2, 2]
    assert all(c["tokens"] > 0 and c["train_s"] > 0 for side in ("a", "b") for c in rec["cost"][side])
    # the seeds recorded are those the runs trained with (config.json), not their folders' names
    def swap_siamese_seeds():  # seed1 <-> seed2
        one, two, spare = (tmp_path / "siamese" / n for n in ("seed1", "seed2", "spare"))
        one.rename(spare)
        two.rename(one)
        spare.rename(two)

    swap_siamese_seeds()
    r = _memread("compare", tmp_path / "lstm", tmp_path / "siamese", "--seeds", "2", "--resamples", "300",
                 "--record", "swapped", "--results", tmp_path / "swapped.jsonl", data_root=fixtures)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "swapped.jsonl").read_text())["seeds"] == {"a": [1, 2], "b": [2, 1]}
    swap_siamese_seeds()
    r = _memread("compare", tmp_path / "lstm", tmp_path / "siamese", "--seeds", "3", data_root=fixtures)
    assert r.returncode == 2 and "seed3" in r.stderr and "Traceback" not in r.stderr
    # read from the runs' unit records, each model's task (its data loaded) is built once, not once a seed
    import memread.experiment as experiment
    from memread.tools.compare import compare_seeds

    built = []
    monkeypatch.setattr(experiment, "build_task", lambda *a, real=experiment.build_task, **k: built.append(a) or
                        real(*a, **k))
    again = compare_seeds(str(tmp_path / "lstm"), str(tmp_path / "siamese"), 2, fixtures, resamples=300)
    assert len(built) == 2 and again["seeds"]["a"]["values"] == got["seeds"]["a"]["values"]
    assert again["seeds"]["b"]["values"] == got["seeds"]["b"]["values"]


def test_a_comparisons_budget_says_how_each_run_ended_and_whether_it_converged(tmp_path, monkeypatch):
    """``ending_fields``: from each run's checkpoint (why it stopped) and metrics.jsonl (its validations): an early
    stop converged; a run stopped by a cap (epochs, steps, time) with its best validation the last one did not."""
    from memread.tools.compare import ending_fields, run_budget
    from memread.training.checkpoint import FORMAT

    def budget(a: list, b: list) -> tuple[str, bool] | None:
        fields = ending_fields(a, b)
        return fields and (fields["budget"], fields["converged"])

    def improving(a: list, b: list) -> list[str]:
        return ending_fields(a, b).get("still_improving", [])

    def run(name: str, stopped: str, best: list[bool], cost: dict | None = None) -> Path:
        d = tmp_path / name
        d.mkdir()
        torch.save({"format": FORMAT, "config": "{}", "vocab": "v", "model": {}, "loop": {"stopped": stopped, **(cost or {})}},
                   d / "checkpoint_last.pt")
        lines = [{"event": "train", "step": 1}] + [{"event": "valid", "epochs_done": 0.5 * (i + 1), "best": b}
                                                   for i, b in enumerate(best)]
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        return d

    early = run("early", "early", [True, True, False, False], {"tokens_trained": 5000, "seconds_trained": 12.345})
    capped_done = run("capped-done", "epochs", [True, False], {"tokens_trained": 800})  # seconds not counted
    capped_improving = run("capped-improving", "max_minutes", [False, True])
    assert run_budget(early) == {"stopped": "early", "epochs": 2.0, "best_epochs": 1.0, "improving": False,
                                 "tokens": 5000, "train_s": 12.345, "train_s_by_device": None}
    # what each run cost, seed by seed
    assert ending_fields([early, capped_done], [capped_improving])["cost"] == {
        "a": [{"tokens": 5000, "train_s": 12.3}, {"tokens": 800, "train_s": None}],
        "b": [{"tokens": None, "train_s": None}]}
    assert ending_fields([early], [tmp_path]) is None  # a folder without a checkpoint (an archive): no budget
    assert run_budget(capped_improving)["improving"] and not run_budget(capped_done)["improving"]
    # a last best by less than the run's min_improvement: its own rule counts no progress, so not still improving
    marginal = run("capped-marginal", "max_minutes", [True, True])
    lines = (marginal / "metrics.jsonl").read_text().splitlines()
    lines[-1] = json.dumps({**json.loads(lines[-1]), "significant": False})
    (marginal / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert not run_budget(marginal)["improving"] and budget([marginal], [early])[1]
    text, converged = budget([early], [capped_done])
    assert converged and text == "A: early stop at 2 epochs (best 1); B: epoch cap at 1 epochs (best 0.5)"
    text, converged = budget([early, capped_improving], [capped_done, early])
    assert not converged and text.startswith("A: early stop at 2 epochs (best 1), time limit at 1 epochs (best 1);")
    assert improving([early, capped_improving], [capped_done, early]) == ["A"]
    assert improving([early], [capped_done, capped_improving]) == ["B"]
    assert improving([early], [capped_done]) == []
    text, _ = budget([early, early, capped_done], [early])
    assert text == ("A: early stop at 2 epochs (best 1) x2, epoch cap at 1 epochs (best 0.5); "
                    "B: early stop at 2 epochs (best 1)")
    # half-epoch evaluations land on batch boundaries (4.49922 epochs): said to a tenth
    odd = run("odd", "early", [True, False])
    lines = (odd / "metrics.jsonl").read_text().replace('"epochs_done": 1.0', '"epochs_done": 4.49922')
    (odd / "metrics.jsonl").write_text(lines.replace('"epochs_done": 0.5', '"epochs_done": 2.49922'))
    assert budget([odd], [odd])[0] == "A: early stop at 4.5 epochs (best 2.5); B: early stop at 4.5 epochs (best 2.5)"
    # what a results line gets, each folder read once (a GPU comparison of three seeds a side reads six checkpoints)
    from memread.tools import compare

    reads = []
    monkeypatch.setattr(compare, "run_budget", lambda d, real=compare.run_budget: reads.append(d) or real(d))
    fields = compare.ending_fields([early, capped_improving], [capped_done])
    assert sorted(map(str, reads)) == sorted(map(str, [early, capped_improving, capped_done]))
    assert fields == {"budget": "A: early stop at 2 epochs (best 1), time limit at 1 epochs (best 1); B: epoch cap at "
                                "1 epochs (best 0.5)", "converged": False,
                      "cost": {"a": [{"tokens": 5000, "train_s": 12.3}, {"tokens": None, "train_s": None}],
                               "b": [{"tokens": 800, "train_s": None}]}, "still_improving": ["A"]}
    assert "still_improving" not in compare.ending_fields([early], [capped_done])


@pytest.mark.slow
def test_a_run_whose_checkpoints_stayed_elsewhere_is_compared_from_its_unit_record(tmp_path, fixtures):
    """``final_evaluation`` keeps the best checkpoint's unit statistics (``units-test.npz``), so a run folder that
    came back from a GPU without its checkpoints is still paired, with the same numbers and the same budget; a
    record that no longer describes the checkpoint in the folder (trained further) is not used."""
    import shutil

    from memread.tools.compare import compare_runs, run_budget
    from memread.training.checkpoint import load_checkpoint, save_checkpoint
    from memread.training.units import read_units, record_path

    runs = _two_wikiqa_runs(tmp_path, fixtures)
    b = runs[1]
    assert read_units(b, "test", "best", None, "32")[2]["batch_size"] > 0  # the record of what final.json measured
    record_path(runs[0], "test").unlink()  # a run from before the records: the comparison keeps one for the next
    fresh = compare_runs(str(runs[0]), str(b), fixtures, resamples=300)
    assert read_units(runs[0], "test", "best", None, "32")[2]["batch_size"] == fresh["batch_size"]
    budget = run_budget(b)
    assert budget["stopped"] == "max_steps" and budget["tokens"] > 0
    # the checkpoints stay behind (a GPU's run folder comes back without them): the same comparison, the same budget
    away = tmp_path / "away"
    away.mkdir()
    for name in ("checkpoint_best.pt", "checkpoint_last.pt"):
        shutil.move(b / name, away / name)
    kept = compare_runs(str(runs[0]), str(b), fixtures, resamples=300)
    assert {k: kept[k] for k in ("a", "b", "difference", "p_value", "units")} == \
        {k: fresh[k] for k in ("a", "b", "difference", "p_value", "units")}
    assert run_budget(b) == budget
    # a partner whose config evaluates at another batch size (a run started without the GPU's 16 streams): the pair
    # is evaluated at the size the checkpoint-less run was recorded at, the only one it can be compared at
    a_config = runs[0] / "config.json"
    stored = json.loads(a_config.read_text())
    a_config.write_text(json.dumps({**stored, "train": {**stored["train"], "eval_batch_size": 3}}))
    pinned = compare_runs(str(runs[0]), str(b), fixtures, resamples=300)
    assert pinned["batch_size"] == fresh["batch_size"] != 3 and pinned["difference"] == fresh["difference"]
    a_config.write_text(json.dumps(stored))
    with pytest.raises(MemreadError, match="checkpoint_last.pt here.*another checkpoint"):
        compare_runs(str(runs[0]), str(b), fixtures, checkpoint="last")
    # the checkpoint back, but changed since (a resumed run trained further): evaluated again, not read
    payload = load_checkpoint(away / "checkpoint_best.pt")
    payload["model"] = {k: v * 1.5 if v.is_floating_point() else v for k, v in payload["model"].items()}
    save_checkpoint(payload, b / "checkpoint_best.pt")
    shutil.move(away / "checkpoint_last.pt", b / "checkpoint_last.pt")
    assert read_units(b, "test", "best", None, "32") is None  # "32": the runs' precision, as the record says:
    assert read_units(b, "valid", "best", None, "32") is None and record_path(b, "test").is_file()
    changed = compare_runs(str(runs[0]), str(b), fixtures, resamples=300)
    assert changed["a"] == fresh["a"] and changed["b"] != fresh["b"]


def test_checkpoint_less_runs_pin_the_batch_size_and_a_bad_record_is_named(tmp_path):
    """A run whose checkpoint stayed elsewhere can only be paired at the batch size its record was made at: a pair
    of such runs made at different sizes is refused in one line; an unreadable record is named, with what to do."""
    from memread.tools.compare import _batch_size_of
    from memread.training.units import read_units, save_units

    def gpu_run(name: str, batch_size: int):
        d = tmp_path / name
        d.mkdir()
        (d / "checkpoint_best.pt").write_bytes(b"weights")
        save_units(d, "test", [{"nll": np.ones(2), "tokens": np.ones(2)}], "best", batch_size, "32")
        (d / "checkpoint_best.pt").unlink()  # it stayed on the GPU
        return str(d)

    at16, also16, at32 = gpu_run("a", 16), gpu_run("b", 16), gpu_run("c", 32)
    here = tmp_path / "here"
    here.mkdir()
    (here / "checkpoint_best.pt").write_bytes(b"weights")  # a run with its checkpoint: no pin of its own
    assert _batch_size_of([str(here), at16], "test", "best", 0) == 16
    assert _batch_size_of([at16, also16], "test", "best", 0) == 16
    assert _batch_size_of([str(here)], "test", "best", 0) == 0
    assert _batch_size_of([at16, at32], "test", "best", 8) == 8  # asked for: as asked
    with pytest.raises(MemreadError, match="different batch sizes"):
        _batch_size_of([at16, at32], "test", "best", 0)
    (tmp_path / "a" / "units-test.npz").write_bytes(b"half a file")
    with pytest.raises(MemreadError, match=r"units-test.npz: not a readable unit record.*remove it"):
        read_units(tmp_path / "a", "test", "best", None, "32")


def test_unit_records_are_deflated_and_read_back_exactly(tmp_path):
    """A bAbI run's record (9,000 questions x 21 statistics, mostly 0 and 1) is committed with its claim
    (``claims.py keep``): written deflated it is ~58 KB, stored 1.5 MB. The values read back bit for bit."""
    import zipfile

    from memread.training.units import read_units, record_path, save_units

    (tmp_path / "checkpoint_best.pt").write_bytes(b"weights")
    rng = np.random.default_rng(0)
    batches = [{"correct": (rng.random(500) < 0.9).astype(float), "count": np.ones(500),
                "nll": rng.random(500)} for _ in range(4)]
    save_units(tmp_path, "test", batches, "best", 500, "32")
    with zipfile.ZipFile(record_path(tmp_path, "test")) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_DEFLATED}
    keys, values, meta = read_units(tmp_path, "test", "best", 500, "32")
    assert keys == ("correct", "count", "nll") and meta["batch_size"] == 500
    np.testing.assert_array_equal(values, np.stack([np.concatenate([b[k] for b in batches]) for k in keys], axis=1))


def test_units_come_in_the_splits_example_order():
    """Batches in length buckets read the examples sorted by length: a table's rows are put back in example order
    (row i of batch order is example concat(groups)[i]); units that are not the examples stay as they are."""
    from memread.data.batching import Batches
    from memread.tools.compare import in_example_order

    table = UnitTable(("correct", "count"), np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [0.0, 1.0]]))
    batches = Batches([None] * 4, [[2, 0], [3, 1]], list)
    ordered = in_example_order(table, batches)
    assert ordered.values[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0]  # examples 0, 1, 2, 3: batch rows 1, 3, 0, 2
    questions = UnitTable(("ap", "questions"), np.ones((3, 2)))  # fewer units than examples: questions
    assert in_example_order(questions, batches) is questions
    assert in_example_order(table, [{"ids": None}]) is table  # a stream of LM batches has no groups


@pytest.mark.slow
def test_runs_that_differ_in_length_bucketing_pair_the_same_examples(tmp_path, fixtures):
    """One SST checkpoint evaluated without buckets and with them (``data.bucket``: the test sentences read sorted by
    length) gives the same unit table, freshly evaluated and read back from the unit record it keeps: a model trained
    in buckets is paired example by example with one trained without."""
    from memread.data.batching import batch_order
    from memread.tools.compare import _evaluate_units
    from memread.training.units import record_path

    runs = {}
    # lr 1e-12: both runs keep the seed's initial weights (their steps are below float32's resolution)
    for name, bucket in (("plain", 0), ("bucketed", 2)):
        cfg = tiny_config(tmp_path, f"{name}.toml", data={"name": "sst", "fine": True, "bucket": bucket},
                          reader={"hidden": 8}, head={"name": "mlp", "emb": 8, "mlp": 8},
                          train=Fresh(lr=1e-12, max_steps=2, batch_size=4, progress=False))
        runs[name] = tmp_path / name
        r = _memread("train", cfg, "--run-dir", runs[name], data_root=fixtures)
        assert r.returncode == 0, r.stderr
    plain, bucketed = runs["plain"], runs["bucketed"]
    record_path(bucketed, "test").unlink()  # evaluated afresh first, then read back from the record it keeps
    a, _, _ = _evaluate_units(str(plain), fixtures, "test", "best", 3, "cpu", False)
    b, _, _ = _evaluate_units(str(bucketed), fixtures, "test", "best", 3, "cpu", False)
    lengths = [len(line.split("(")) for line in (fixtures / "sst" / "test.txt").read_text().splitlines()]
    assert batch_order(lengths, 3, 2, None) != batch_order(lengths, 3, 0, None)  # the buckets do reorder the test
    assert len(a) == len(lengths) and a.keys == b.keys
    np.testing.assert_allclose(b.values, a.values, rtol=1e-6, atol=1e-9)
    assert len(set(a.values[:, a.keys.index("nll")].round(6))) > 1  # the rows tell the examples apart
    assert record_path(bucketed, "test").is_file()  # kept by the comparison, in the bucketed batch order
    again, _, _ = _evaluate_units(str(bucketed), fixtures, "test", "best", 3, "cpu", False)
    np.testing.assert_allclose(again.values, a.values, rtol=1e-6, atol=1e-9)


def test_kept_run_records_with_shared_vocabularies_give_their_recorded_claim(real_data):
    """The committed records of two ended runs (results/runs: no checkpoints, each vocabulary.json a link to its
    one content-addressed copy) are paired again from their unit records: the recorded claim's numbers."""
    from conftest import REPO

    root = real_data("ptb")
    kept = REPO / "results/runs/claims/ptb-lstmn-1layer-dropout-long"
    a, b = kept / "lstmn-empty/seed1", kept / "lstm/seed1"
    assert (a / "vocab.json").is_symlink() and not (a / "checkpoint_best.pt").exists()
    got = compare.compare_runs(str(a), str(b), root, resamples=200)
    lines = [json.loads(line) for line in (REPO / "results/results.jsonl").read_text().splitlines() if line.strip()]
    want = [r for r in lines if r["experiment"] == "claim-ptb-lstmn-1layer-dropout-long-lstmn-empty-vs-lstm"][-1]
    assert (got["a"], got["b"]) == (pytest.approx(want["a"], abs=1e-6), pytest.approx(want["b"], abs=1e-6))
    assert got["difference"] == pytest.approx(want["value"], abs=1e-6)


def _tiny_run(tmp_path, name: str, data: dict, train_steps: int = 0, seed: int = 1):
    """A tiny run folder: config.json and vocab.json, and with ``train_steps`` its checkpoints."""
    from memread.config import experiment_from_dict
    from memread.experiment import start_run

    lm = data["name"] == "stories-text"
    cfg = experiment_from_dict({"data": data, "reader": {"name": "lstm", "hidden": 8},
                                "head": {"name": "lm" if lm else "pointer", "emb": 8},
                                "train": {"max_steps": max(train_steps, 1), "batch_size": 8, "seed": seed,
                                          "progress": False, "eval_batch_size": 16}}, name)
    run = tmp_path / name
    with start_run(cfg, run, tmp_path) as trainer:
        if train_steps:
            trainer.fit()
    return str(run)


def test_language_models_of_different_vocabularies_are_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """Two LMs whose vocabularies differ: their perplexities count other events as <unk>, and `memread compare` said
    which was better all the same. Refused in one line naming both sizes and the [data] key, before anything is
    evaluated or written; other batching of the same data (bptt) is no difference."""
    from memread import cli

    monkeypatch.setenv("MEMREAD_DATA", str(tmp_path))
    monkeypatch.delenv("MEMREAD_DEBUG", raising=False)
    a = _tiny_run(tmp_path, "a", {"name": "stories-text", "stories": 300, "bptt": 12}, train_steps=2)
    b = _tiny_run(tmp_path, "b", {"name": "stories-text", "stories": 300, "bptt": 12, "max_vocab": 40}, train_steps=2)
    c = _tiny_run(tmp_path, "c", {"name": "stories-text", "stories": 300, "bptt": 20})
    sizes = [len(json.loads((tmp_path / r / "vocab.json").read_text())["itos"]) for r in ("a", "b")]
    assert sizes[0] > sizes[1] == 40
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    with pytest.raises(MemreadError, match=rf"have different vocabularies \(vocabulary: {sizes[0]} vs 40 words; "
                                           r"data.max_vocab: 0 vs 40\): a perplexity counts"):
        compare.compare_runs(a, b, tmp_path, resamples=100)
    capsys.readouterr()
    assert cli.main(["compare", a, b, "--resamples", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("memread: error:") == 1 and "different vocabularies" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == before  # nothing evaluated
    assert compare.check_same_data(a, c) == []  # the same words, cut into other segments


def test_runs_of_different_data_are_compared_saying_so(tmp_path):
    """Two cloze readers, one trained with max_vocab 60 (another vocabulary): accuracy on the same questions still
    compares, but the result names the differences and its verdict says the difference is of models and data; two
    seeds of the same data get no such note."""
    data = {"name": "stories", "stories": 300}
    a = _tiny_run(tmp_path, "a", data, train_steps=2)
    b = _tiny_run(tmp_path, "b", {**data, "max_vocab": 60}, train_steps=2)
    same = _tiny_run(tmp_path, "same", data, train_steps=2, seed=2)
    sizes = [len(json.loads((tmp_path / r / "vocab.json").read_text())["itos"]) for r in ("a", "b")]
    assert sizes[0] > sizes[1]
    plain = compare.compare_runs(a, same, tmp_path, resamples=200)
    assert "data_differences" not in plain and "different data" not in plain["verdict"]
    assert "different data" not in compare.summary_text(plain)
    got = compare.compare_runs(a, b, tmp_path, resamples=200)
    assert got["data_differences"] == ["data.max_vocab: 0 vs 60", f"vocabulary: {sizes[0]} vs {sizes[1]} words"]
    said = ("but the runs were trained on different data (data.max_vocab: 0 vs 60; vocabulary: "
            f"{sizes[0]} vs {sizes[1]} words): the difference is of models and data together")
    assert got["verdict"].endswith(said) and said in compare.summary_text(got)
    assert got["units"] == plain["units"] and got["a"] == plain["a"]  # the same questions, A's accuracy unchanged
    from conftest import REPO
    import sys

    sys.path.insert(0, str(REPO))  # the ledger lives in the checkout's reproduction/ package
    from reproduction.ledger import result_line

    recorded = result_line({**got, "split": "test"}, "claim-x", "stories", "memread compare a b", None, 1.0)
    assert recorded["data_differences"] == got["data_differences"]  # the results line says so too
    assert "data_differences" not in result_line({**plain, "split": "test"}, "claim-x", "stories", "", None, 1.0)
