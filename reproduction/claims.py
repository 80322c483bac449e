"""The claims scheduler: the papers' claims of issue 23 (``reproduction/claims.toml``: each as the `memread reproduce`
rows it compares, their seeds and recipe, and the paired comparisons that decide it); one command starts a claim's
runs on both cores, then records them. (``python scripts/claims.py ...`` still runs it, for old command lines.)

    python -m reproduction.claims list                       every claim: rows, seeds, estimated core-minutes
    python -m reproduction.claims plan wikiqa [--jobs 2]     the shell commands a run would execute (--threads N)
    python -m reproduction.claims status [wikiqa]            where each run stands: epochs, best valid, how it ended,
                                                        and an unfinished run's hours to its epoch cap
    python -m reproduction.claims stage CLAIM [--only RUN,..] [--to .carry]   unfinished runs, slim, for a GPU call
    python -m reproduction.claims keep CLAIM [--only RUN,..]   ended runs' records into results/runs/, to commit
    python -m reproduction.claims unpack OUT1 [OUT2 ..] [--logs results/runs/device-calls/call-N]   device calls' runs into runs/
    python -m reproduction.claims resumable RUN_DIR ..       what carries each unfinished run (gpu_checks.sh's CKPTS)
    nohup python -m reproduction.claims run wikiqa > logs/claim-wikiqa.log 2>&1 &
    python -m reproduction.claims compare wikiqa             its comparisons recorded again from its ended runs (no rows)

`run` trains every (row, seed) with `memread train` into ``runs/reproduce/ROW/seedS`` (what `memread reproduce`
reads), spread over ``--jobs`` queues balanced by the estimated minutes (longest first), each run on ``--threads``
CPU threads (default 1; a claim's last run alone goes ~1.85x faster on two: `--jobs 1 --threads 2`); a killed
claim resumes its runs where they stopped (`memread train --resume`). Then `memread reproduce ROW --seeds N`
records each row (it finds the finished runs and only evaluates) and `memread compare ROOT_A ROOT_B --seeds N
--record claim-CLAIM-NAME` the claim's comparisons, all in ``results/results.jsonl``. A claim
whose recipe changes the paper's model (WikiQA at 1 x 300 for both readers) keeps its runs in
``runs/claims/NAME/`` and records only its comparisons (with each seed's value and the means and stds).

The minutes are this machine's (Intel Xeon, one thread each, two jobs side by side), measured in session 14
(SST) and session 12 (WikiQA, before the compiled NSE loop: an upper bound). The processes die with a session;
run folders usually outlive it, and a claim longer than a session is started again with `run` in the next one
(`status` says how far each of its runs got). Not always: sessions 21 and 28 began from a new checkout without
runs/ (git-ignored), and every unfinished run was lost. What an ended run's comparisons need (its unit records, no
checkpoints) survives that once it is in results/runs/ and committed: `run` copies each run there as it ends (and
`keep` any ended run), and puts kept runs back.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from reproduction import REPO
from reproduction.rows import find_row

RUN_ROOT = Path("runs/reproduce")
CLAIMS_FILE = Path(__file__).resolve().parent / "claims.toml"


@dataclass(frozen=True)
class Run:
    row: str  # the `memread reproduce` row whose config it trains ("" for a config no paper's table has a row for)
    minutes: float  # estimated minutes a seed, one thread
    sets: tuple[str, ...] = ()  # overrides
    config: str = ""  # the config, where the run has no row (bAbI: no table of the papers reports it)
    seeds: int | None = None  # at most this many of the claim's seeds (a costly side comparison at 1 seed)

    @property
    def config_path(self) -> Path:
        return Path(self.config) if self.config else Path(find_row(self.row).config)


@dataclass(frozen=True)
class Claim:
    name: str
    says: str  # the claim, as the paper makes it
    runs: dict[str, Run]  # label -> run (the label is the row id where the claim keeps the paper's setup)
    # (A, B, name, the paper's A - B): A - B is recorded as experiment "claim-CLAIM-NAME" beside the paper's
    # difference (0: the paper has them level; None: no claim of the paper), in the metric's own unit (accuracy and
    # MAP as fractions)
    compare: list[tuple[str, str, str, float | None]]
    seeds: int = 3
    # False where the overrides change the model from the paper's row (sizes, a tape start) or a claim trains
    # one row twice: the runs then live in runs/claims/CLAIM/LABEL/ and only the comparisons are recorded
    # (each with its seeds' values, means and stds), never numbers under the paper's row ids
    paper_setup: bool = True
    # in a claim that does not keep the paper's setup: its runs of a row's config as it is (a row, no sets) are
    # recorded under the row's id too, from their folders (the ptb-sentence claims: LSTMN Table 1's sentence rows)
    record_rows: bool = False
    paper: str = ""  # the paper whose claim it is, where no run names a row (otherwise: A's row's paper)

    def paper_of(self, comparison: str) -> str:
        """The paper a comparison of this claim tests: that of its A run's row, else the claim's ``paper``, else
        that of the claim's first run with a row ("" where none says)."""
        a = next((a for a, _, name, _ in self.compare if name == comparison), None)
        if a is not None and self.runs[a].row:
            return find_row(self.runs[a].row).paper
        if self.paper:
            return self.paper
        return next((find_row(r.row).paper for r in self.runs.values() if r.row), "")

    def overrides(self, label: str) -> list[str]:
        return ["train.progress=false", *self.runs[label].sets]

    @property
    def root(self) -> Path:
        return RUN_ROOT if self.paper_setup else Path("runs/claims") / self.name

    def seeds_of(self, label: str) -> int:
        """How many seeds the run ``label`` trains: the claim's, or fewer where the run says so."""
        return min(self.seeds, self.runs[label].seeds or self.seeds)

    def run_dirs(self):
        """Each run's folder, label by label, seed by seed: ``ROOT/LABEL/seedS``."""
        return [self.root / label / f"seed{s}" for label in self.runs for s in range(1, self.seeds_of(label) + 1)]


CLAIM_KEYS = {"name", "says", "runs", "compare", "seeds", "paper_setup", "record_rows", "paper"}
RUN_KEYS = {"row", "minutes", "sets", "config", "seeds"}


def claim_of(experiment: str, table: dict[str, "Claim"] | None = None) -> tuple["Claim", str] | None:
    """The claim and comparison name of a recorded ``claim-NAME-COMPARISON`` experiment (the longest claim name
    that fits; a comparison recorded by hand need not be in the claim's list), or None."""
    table = CLAIMS if table is None else table
    fits = [c for c in table.values() if experiment.startswith(f"claim-{c.name}-")]
    if not fits:
        return None
    claim = max(fits, key=lambda c: len(c.name))
    return claim, experiment[len(f"claim-{claim.name}-"):]


def load_claims(path: Path = CLAIMS_FILE) -> dict[str, Claim]:
    """``claims.toml`` as ``{name: Claim}``, in the file's order (its header comment says what each key means);
    an unknown key is an error naming the claim."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out: dict[str, Claim] = {}
    for raw in doc["claim"]:
        name = raw.get("name", "?")
        extra = set(raw) - CLAIM_KEYS | {f"runs.{label}.{k}" for label, r in raw.get("runs", {}).items()
                                          for k in set(r) - RUN_KEYS}
        if extra:
            raise ValueError(f"{path}: claim {name}: unknown key(s) {', '.join(sorted(extra))}")
        runs = {label: Run(r.get("row", ""), r["minutes"], tuple(r.get("sets", ())), r.get("config", ""),
                           r.get("seeds")) for label, r in raw["runs"].items()}
        compare = [(c["a"], c["b"], c["name"], c.get("paper")) for c in raw["compare"]]
        out[name] = Claim(name, raw["says"], runs, compare, raw.get("seeds", 3), raw.get("paper_setup", True),
                          raw.get("record_rows", False), raw.get("paper", ""))
    return out


CLAIMS = load_claims()


def only(claim: Claim, labels: list[str]) -> Claim:
    """The claim cut down to the runs ``labels`` and the comparisons between two of them (KeyError: not a run)."""
    runs = {label: claim.runs[label] for label in labels}
    return replace(claim, runs=runs, compare=[c for c in claim.compare if c[0] in runs and c[1] in runs])


def resume_files(run_dir: Path) -> list[Path]:
    """What a run needs to go on on another machine (``stage``, ``gpu_checks.sh``'s ``CKPTS``): its last checkpoint,
    its best unless that holds the same weights (:func:`memread.training.loop.last_is_best`; a resume writes it
    again: :func:`memread.training.state.mend_best`), its config, metrics and vocabulary. None for a run that
    has not checkpointed or has ended (an early stop, or its epoch or step cap: a time limit's stop goes on)."""
    from memread.training.checkpoint import load_checkpoint
    from memread.training.loop import ENDED, last_is_best, valid_records

    run_dir = Path(run_dir)
    if not (run_dir / "checkpoint_last.pt").is_file():
        return []
    loop = load_checkpoint(run_dir / "checkpoint_last.pt").get("loop") or {}
    if loop.get("finished") and loop.get("stopped") in ENDED:
        return []
    best = [] if last_is_best(valid_records(run_dir), int(loop.get("global_step", -1))) else ["checkpoint_best.pt"]
    names = ("checkpoint_last.pt", *best, "config.json", "metrics.jsonl", "vocab.json")
    return [run_dir / n for n in names if (run_dir / n).is_file()]


def record_files(run_dir: Path) -> list[Path]:
    """What an ended run leaves for its comparisons once its checkpoints are gone (another machine, a new checkout:
    ``keep``): its config, metrics, vocabulary, ``final.json`` and unit records (``units-*.npz``), from which
    ``memread compare`` judges it. None for a run without a final evaluation and unit records, or whose checkpoint
    says its training has not ended (a time limit's stop goes on)."""
    from memread.training.loop import ENDED
    from memread.training.units import run_loop

    run_dir = Path(run_dir)
    units = sorted(run_dir.glob("units-*.npz"))
    if not (run_dir / "final.json").is_file() or not units:
        return []
    loop = run_loop(run_dir) or {}  # the checkpoint's, or its unit record's (checkpoints stayed elsewhere)
    if not (loop.get("finished") and loop.get("stopped") in ENDED):
        return []
    names = ("config.json", "metrics.jsonl", "vocab.json", "final.json")
    return [run_dir / n for n in names if (run_dir / n).is_file()] + units


def train_command(claim: Claim, label: str, seed: int, extra: tuple[str, ...] = ()) -> list[str] | None:
    """``extra``: overrides of this invocation for every run (a device, a time limit), after the claim's own. A
    run folder with a checkpoint is resumed (a killed claim goes on where it stopped) with the [train] values in
    which the claim now differs from it (a raised epoch cap); None for a run that has ended and that those values
    give no more to train (an early stop is final), so a claim started again only records."""
    config = claim.runs[label].config_path
    run_dir = claim.root / label / f"seed{seed}"
    overrides = [*claim.overrides(label), *extra, f"train.seed={seed}"]
    if not (run_dir / "checkpoint_last.pt").exists() and (run_dir / "final.json").exists():
        return None  # trained on another machine, which kept its checkpoints: compared from its unit records
    if not (run_dir / "checkpoint_last.pt").exists():
        sets = [x for o in overrides for x in ("--set", o)]
        return ["memread", "train", str(config), "--run-dir", str(run_dir), *sets]
    from memread.config import load_experiment
    from memread.experiment import FIXED_ON_RESUME, read_run_config
    from memread.training.checkpoint import loop_state
    from memread.training.loop import Trainer
    from memread.typed import override_value

    stored, wanted = read_run_config(run_dir).to_dict(), load_experiment(REPO / config, overrides)
    differ = {f"{section}.{k}": v for section, values in wanted.to_dict().items() for k, v in values.items()
              if stored.get(section, {}).get(k) != v}
    other = [k for k in differ if not k.startswith("train.")]
    if other:
        raise SystemExit(f"{run_dir}: holds a run of another config ({other[0]} differs from the claim's); remove "
                         f"that folder or the change. Nothing was run")
    changed = {k: v for k, v in differ.items() if k.split(".", 1)[1] not in FIXED_ON_RESUME}
    loop = loop_state(run_dir)
    if loop.get("finished") and not Trainer.budget_raised(
            wanted.train, loop.get("stopped"), int(loop.get("epoch", 0)), int(loop.get("global_step", 0))):
        return None
    sets = [x for k, v in changed.items() for x in ("--set", f"{k}={override_value(v)}")]
    return ["memread", "train", "--resume", str(run_dir), *sets]


def queues(claim: Claim, jobs: int, ended: frozenset = frozenset()) -> list[list[tuple[str, int]]]:
    """(label, seed) pairs in ``jobs`` queues: seed by seed, and within a seed the longest run first, each onto the
    least loaded queue; runs in ``ended`` (nothing left to train) weigh nothing."""
    # seed by seed (a claim cut short keeps whole seeds), within a seed the runs of every seed first
    work = sorted(((label, s) for label in claim.runs for s in range(1, claim.seeds_of(label) + 1)),
                  key=lambda w: (w[1], claim.runs[w[0]].seeds is not None, -claim.runs[w[0]].minutes))
    out: list[list[tuple[str, int]]] = [[] for _ in range(jobs)]
    load = [0.0] * jobs
    for row, s in work:
        j = load.index(min(load))
        out[j].append((row, s))
        load[j] += 0.0 if (row, s) in ended else claim.runs[row].minutes
    return out


def commands(claim: Claim, jobs: int, extra: tuple[str, ...] = ()) -> list[list[tuple[str, int, list[str] | None]]]:
    """Each queue's (label, seed, ``train_command``), the runs with nothing left to train weighing nothing."""
    cmds = {(label, s): train_command(claim, label, s, extra)
            for label in claim.runs for s in range(1, claim.seeds_of(label) + 1)}
    ended = frozenset(w for w, cmd in cmds.items() if cmd is None)
    return [[(label, s, cmds[label, s]) for label, s in q] for q in queues(claim, jobs, ended)]


def finish_commands(claim: Claim, extra: tuple[str, ...] = (), device: str | None = None,
                    rows: bool = True) -> list[list[str]]:
    """What records an ended claim: `memread reproduce` of each row (where the claim keeps the paper's setup and
    ``rows``; in a claim with ``record_rows``, of each run that trains a row's config unchanged, from its folders), then `memread compare --record` of each comparison."""
    cmds = []
    for row in claim.runs if claim.paper_setup and rows else ():
        sets = [x for o in [*claim.overrides(row), *extra] for x in ("--set", o)]
        cmds.append(["memread", "reproduce", row, "--seeds", str(claim.seeds), "--run-root", str(RUN_ROOT), *sets])
    for label, run in claim.runs.items() if claim.record_rows and not claim.paper_setup and rows else ():
        if run.row and not run.sets:  # a run of a row's config as it is: its numbers are the row's
            sets = [x for o in [*claim.overrides(label), *extra] for x in ("--set", o)]
            cmds.append(["memread", "reproduce", run.row, "--seeds", str(claim.seeds_of(label)),
                         "--runs", str(claim.root / label), *sets])
    on = ["--device", device] if device else []
    for a, b, name, paper in claim.compare:  # one seed: a plain comparison of the two seed folders
        seeds = min(claim.seeds_of(a), claim.seeds_of(b))
        runs = ([str(claim.root / a), str(claim.root / b), "--seeds", str(seeds)] if seeds > 1 else
                [str(claim.root / a / "seed1"), str(claim.root / b / "seed1")])
        told = ["--paper-value", f"{paper:g}"] if paper is not None else []
        cmds.append(["memread", "compare", *runs, "--record", f"claim-{claim.name}-{name}", *told, *on])
    return cmds


def extra_overrides(sets: list[str], device: str | None) -> tuple[str, ...]:
    """The invocation's ``--set`` values, with ``--device`` as ``train.device``."""
    return (*sets, *([f'train.device="{device}"'] if device else []))


def plan(claim: Claim, jobs: int, extra: tuple[str, ...] = (), device: str | None = None, threads: int = 1) -> str:
    """The shell commands `run` would execute, each with the CPU threads `run` gives it (OMP_NUM_THREADS)."""
    env = f"OMP_NUM_THREADS={threads} "
    lines = [f"# {claim.name}: {claim.says}"]
    for j, q in enumerate(commands(claim, jobs, extra)):
        minutes = sum(claim.runs[label].minutes for label, _, cmd in q if cmd)
        lines.append(f"# queue {j + 1} (~{minutes:.0f} min on a CPU core):")
        for row, s, cmd in q:
            ended = f"# {claim.root / row / f'seed{s}'}: ended; nothing to train"
            lines.append(env + shlex.join(cmd) if cmd else ended)
    lines.append("# then:")
    lines += [env + shlex.join(c) for c in finish_commands(claim, extra, device)]
    return "\n".join(lines)


def run_status(run_dir: Path) -> str:
    """Where one run stands, from its folder: not started; training now (the process holding its lock) or
    unfinished and not running (its process died with a session), with its epochs and its best validation; or how
    it ended (``memread compare``'s budget words)."""
    from memread.tools.compare import STOPS, epochs_text, run_budget
    from memread.training.loop import ENDED, valid_records

    if not (run_dir / "metrics.jsonl").is_file():
        return f"not here; kept in {kept(run_dir)} (`run` puts it back)" if kept(run_dir).is_dir() else "not started"
    valid = valid_records(run_dir)
    if not valid:
        return f"{_unfinished(run_dir)}: no validation yet"
    name = valid[-1].get("selection_metric", "")
    best = max((r for r in valid if r.get("best")), key=lambda r: r.get("epochs_done") or 0, default=None)
    seen = f"{epochs_text(valid[-1].get('epochs_done', 0))} epochs"
    if best and name in best:
        seen += (f"; best valid {name} {best[name]:.4g} at epoch {epochs_text(best.get('epochs_done', 0))}, "
                 f"last {valid[-1][name]:.4g}")
    budget = run_budget(run_dir)  # from its unit record where its checkpoints stayed on another machine
    stopped = budget and budget["stopped"]
    if not stopped:
        return f"{_unfinished(run_dir)}: {seen}{_time_left(run_dir, valid[-1])}"
    elsewhere = "" if (run_dir / "checkpoint_last.pt").is_file() else "; trained elsewhere, compared from its records"
    how = STOPS.get(stopped, stopped) + (", still improving" if budget["improving"] else "")
    goes_on = "" if stopped in ENDED else _time_left(run_dir, valid[-1])  # a time limit's stop: `run` goes on
    return f"done ({how}): {seen}{elsewhere}{goes_on}"


def _time_left(run_dir: Path, last_valid: dict, window: int = 5) -> str:
    """How long an unfinished run needs at most, to its epoch cap (an early stop can come sooner), at the training
    speed of its last ``window`` logs (this machine's, after a resume; validations not counted): ``"; 27 epochs to
    its cap of 40 at ~11 min an epoch: ~5.0 h"``, or "" where the folder cannot tell (no config, or only logs from
    before train logs wrote their seconds that do not count their tokens either: a cloze or classification run's)."""
    import json

    from memread.tools.compare import epochs_text
    from memread.training.loop import MetricsLog

    try:
        cap = int(json.loads((run_dir / "config.json").read_text())["train"]["epochs"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    logs = [(r["step"], _log_seconds(r)) for r in MetricsLog(run_dir / "metrics.jsonl").events()
            if r.get("event") == "train"]
    logs = [(step, s) for step, s in logs if s is not None][-window - 1:]
    done, step = last_valid.get("epochs_done") or 0, last_valid.get("step") or 0
    if len(logs) < 2 or done <= 0 or step <= 0 or cap <= done or logs[-1][0] <= logs[0][0]:
        return ""
    seconds = sum(s for _, s in logs[1:])  # each log's since the one before
    epoch_s = step / done * seconds / (logs[-1][0] - logs[0][0])  # steps an epoch x seconds a step
    return (f"; {epochs_text(cap - done)} epochs to its cap of {cap} at ~{epoch_s / 60:.0f} min an epoch: "
            f"~{(cap - done) * epoch_s / 3600:.1f} h")


def _log_seconds(record: dict) -> float | None:
    """The seconds a train log trained since the one before: its ``seconds``, or in logs from before they were
    written, its tokens over its speed (only the language models' logs count their tokens)."""
    if record.get("seconds"):
        return float(record["seconds"])
    if record.get("tokens_per_s") and record.get("train_tokens"):
        return record["train_tokens"] / record["tokens_per_s"]
    return None


def _unfinished(run_dir: Path) -> str:
    from memread.training.runlock import writer

    who = writer(run_dir)
    return f"training ({who.split(': ', 1)[0]})" if who else "unfinished, not running (`run` resumes it)"


def status(claim: Claim) -> str:
    lines = [f"# {claim.name}: {claim.says}"]
    for run_dir in claim.run_dirs():
        lines.append(f"{str(run_dir):52s} {run_status(run_dir)}")
    return "\n".join(lines)


def _here(cmd: list[str]) -> list[str]:
    """``memread ...`` as this interpreter's module (on a machine where memread is on PYTHONPATH, not installed)."""
    return [sys.executable, "-m", "memread", *cmd[1:]] if cmd[0] == "memread" else cmd


def run(claim: Claim, jobs: int, extra: tuple[str, ...] = (), device: str | None = None, threads: int = 1) -> int:
    """Train the claim's runs in ``jobs`` queues, each run on ``threads`` CPU threads (OMP_NUM_THREADS), then
    record its rows and comparisons (:func:`finish`)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    failed: list[str] = []

    def work(q: list[tuple[str, int, list[str] | None]], j: int) -> None:
        for row, s, cmd in q:
            if cmd is None:
                print(f"[queue {j + 1}] {claim.root / row / f'seed{s}'}: ended; nothing to train", flush=True)
                continue
            cmd = _here(cmd)
            print(f"[queue {j + 1}] {time.strftime('%H:%M:%S')} {shlex.join(cmd)}", flush=True)
            done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                failed.append(f"{row} seed {s}: {done.stderr.strip().splitlines()[-1:]}")
                continue
            # kept as it ends, not when the whole claim has: a claim outlives sessions, and a new checkout has no
            # runs/ (session 28 lost a 3-layer gLSTM that had ended the session before, never kept)
            where = keep_run(claim.root / row / f"seed{s}")
            if where is not None:
                print(f"[queue {j + 1}] {time.strftime('%H:%M:%S')} ended; kept in {where}: commit it", flush=True)

    threads = [threading.Thread(target=work, args=(q, j)) for j, q in enumerate(commands(claim, jobs, extra))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        print("failed:\n" + "\n".join(failed), file=sys.stderr)
        return 1
    return finish(claim, jobs, extra, device, env)


def finish(claim: Claim, jobs: int, extra: tuple[str, ...], device: str | None, env: dict, rows: bool = True) -> int:
    """The claim's rows (unless not ``rows``) and comparisons, ``jobs`` at a time (each appends its lines to
    results.jsonl in one write): on a GPU a 3-seed comparison takes ~50 s, four of them one after the other outlast
    a call's grace."""
    lock = threading.Lock()

    def one(cmd: list[str]) -> int:
        with lock:
            print(f"{time.strftime('%H:%M:%S')} {shlex.join(cmd)}", flush=True)
        done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
        what = cmd[cmd.index("--record") + 1] if "--record" in cmd else " ".join(cmd[3:5])  # "reproduce ROW"
        with lock:
            print(f"{time.strftime('%H:%M:%S')} done: {what}\n{done.stdout.strip()[-2000:]}", flush=True)
            if done.returncode != 0:
                print(done.stderr.strip()[-2000:], file=sys.stderr)
        return done.returncode

    cmds = list(map(_here, finish_commands(claim, extra, device, rows)))
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(cmds) or 1))) as pool:
        codes = list(pool.map(one, cmds))
    return 1 if any(codes) else 0


STAGE_LIMIT_MIB = 56  # the device tool carries 64 MiB a call, the tree and a data slice (~7 MiB) included


def stage(claim: Claim, to: Path) -> int:
    """Copy each unfinished run of ``claim`` that has a checkpoint into ``to/runs/claims/..`` with what a resume
    needs alone: the last checkpoint, and the best only where it is not the same weights (a resume writes the
    last again as the best: :func:`memread.training.state.mend_best`), its config, metrics and vocabulary. ``gpu_checks.sh`` puts
    them in place before the claims start; name ``to`` in the device call's ``carry``. Says each run's size;
    1 where the whole passes what the tool carries."""
    import shutil

    total = 0
    for run_dir in claim.run_dirs():
        files = resume_files(run_dir)  # none for a run not begun here (or trained elsewhere), or ended
        if not files:
            continue
        dest = to / run_dir
        dest.mkdir(parents=True, exist_ok=True)
        for f in files:
            shutil.copy2(f, dest / f.name)
        size = sum(f.stat().st_size for f in files)
        total += size
        print(f"{dest}: {size / 2**20:.1f} MiB ({', '.join(f.name for f in files)})")
    print(f"{to}: {total / 2**20:.1f} MiB staged" + (f", more than the ~{STAGE_LIMIT_MIB} MiB a device call carries "
                                                     f"beside the tree: stage fewer runs (--only)"
                                                     if total > STAGE_LIMIT_MIB * 2**20 else ""))
    return 1 if total > STAGE_LIMIT_MIB * 2**20 else 0


KEPT = Path("results/runs")  # ended runs' records, committed: a new checkout has no runs/ (git-ignored)


def kept(run_dir: Path) -> Path:
    """Where ``keep`` puts ``run_dir``'s records: ``runs/claims/X/..`` -> ``results/runs/claims/X/..``."""
    return KEPT / run_dir.relative_to("runs")


def keep_vocab(vocab: Path, dest: Path) -> None:
    """``dest`` as a relative link to ``results/runs/vocab/SHA256.json``, the vocabulary's content-addressed copy
    (a claim's runs share one vocabulary; a link is read as the file, and `restore` copies the file)."""
    import hashlib
    import os
    import shutil

    store = KEPT / "vocab"
    store.mkdir(parents=True, exist_ok=True)
    target = store / f"{hashlib.sha256(vocab.read_bytes()).hexdigest()}.json"
    if not target.exists():
        shutil.copy2(vocab, target)
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    dest.symlink_to(os.path.relpath(target, dest.parent))


def keep_run(run_dir: Path) -> Path | None:
    """Copy one ended run's records (:func:`record_files`: config, metrics, vocabulary, final
    evaluation, unit records; no checkpoints, ~0.3 MiB a PTB run) into ``results/runs/``; where they went, or None
    for a run that has not ended (or has no unit records). A run kept before holds only its present records after."""
    import shutil

    from memread.training.units import copy_record

    files = record_files(run_dir)
    if not files:
        return None
    dest = kept(run_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        if f.suffix == ".npz":  # unit records, deflated (a run trained before memread deflated them)
            copy_record(f, dest / f.name)
        elif f.name == "vocab.json":  # one file per distinct vocabulary, the run's a link to it
            keep_vocab(f, dest / f.name)
        else:
            shutil.copy2(f, dest / f.name)
    for stale in set(dest.iterdir()) - {dest / f.name for f in files}:  # an earlier keep's, no longer the run's
        stale.unlink()
    print(f"{dest}: {sum((dest / f.name).stat().st_size for f in files) / 2**20:.2f} MiB ({len(files)} files)",
          flush=True)
    return dest


def keep(claim: Claim) -> int:
    """Copy each ended run's records into ``results/runs/`` (:func:`keep_run`), to be committed: run folders are
    git-ignored and a session that starts from a new checkout has none, so the runs a pending comparison needs (the
    LSTM of a claim whose LSTMNs still train) would have to be trained again. ``run`` keeps each run as it ends and
    puts kept runs back (:func:`restore`). 1 where no run of the claim has ended."""
    n = 0
    for run_dir in claim.run_dirs():
        if keep_run(run_dir) is None:
            print(f"{run_dir}: not ended (or no unit records): left")
        else:
            n += 1
    return 0 if n else 1


def restore(claim: Claim) -> list[Path]:
    """Put back each run of ``claim`` that ``keep`` kept and that has no folder here (a new checkout): compared from
    its records as a run trained elsewhere. A folder that exists, even unfinished, is left as it is."""
    import shutil

    out = []
    for run_dir in claim.run_dirs():
        if kept(run_dir).is_dir() and not run_dir.exists():
            shutil.copytree(kept(run_dir), run_dir)
            out.append(run_dir)
    return out


def _progress(run_dir: Path) -> int | None:
    """How far a run folder can carry a claim: the step of its last checkpoint (it resumes from there), or, for an
    ended run without one (trained elsewhere), the last step of its metrics (compared from its records); None for
    a folder that can do neither (unfinished, its checkpoints left behind)."""
    from memread.training.checkpoint import loop_state
    from memread.training.loop import MetricsLog

    if (run_dir / "checkpoint_last.pt").is_file():
        return int(loop_state(run_dir).get("global_step", 0))
    if record_files(run_dir):
        return max((int(r.get("step", 0)) for r in MetricsLog(run_dir / "metrics.jsonl").events()), default=0)
    return None


def unpack(outs: list[Path], logs_to: Path | None = None) -> int:
    """Put what device calls brought back (``gpu_checks.sh``'s ``runs.tgz`` and ``ckpt.tar.part-*``, in the folders
    ``outs``, oldest call first) in place under ``runs/``: each run folder that can go on (a checkpoint) or be
    compared (ended, with its unit records) replaces the one here if it got further (the step of its checkpoint,
    or its last for an ended run); one that can do neither (its checkpoints stayed on the device, as a second call
    leaves the first call's when they do not fit) is left. The calls' logs, timeline and results go to
    ``logs_to``/CALL where given. 1 where a call's files cannot be read."""
    import io
    import shutil
    import tarfile
    import tempfile

    for out in outs:
        with tempfile.TemporaryDirectory() as tmp:
            got = Path(tmp)
            parts = sorted(out.glob("ckpt.tar.part-*"))
            try:
                with tarfile.open(out / "runs.tgz") as t:
                    t.extractall(got, filter="data")
                if parts:  # one tar split in parts of 15 MiB
                    with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts))) as t:
                        t.extractall(got, filter="data")
            except (OSError, tarfile.TarError) as e:
                print(f"{out}: its runs.tgz or ckpt.tar.part-* cannot be read ({e}); nothing of it was placed",
                      file=sys.stderr)
                return 1
            if logs_to is not None:
                dest = logs_to / out.name
                dest.mkdir(parents=True, exist_ok=True)
                for f in [*(got / "logs").glob("*"), *(out / n for n in ("timeline.txt", "results.jsonl"))]:
                    if f.is_file():
                        shutil.copy2(f, dest / ("device-results.jsonl" if f.name == "results.jsonl" else f.name))
            for metrics in sorted((got / "runs").rglob("metrics.jsonl")):
                incoming, here = metrics.parent, Path(metrics.parent.relative_to(got))
                new = _progress(incoming)
                if new is None:
                    print(f"{here}: left (from {out}: unfinished, its checkpoints stayed on the device)")
                    continue
                old = _progress(here) if here.is_dir() else None
                if old is not None and old >= new:
                    print(f"{here}: the one here kept (step {old}; {out} brought step {new})")
                    continue
                if here.exists():
                    shutil.rmtree(here)
                here.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(incoming, here)
                how = "checkpoint" if (here / "checkpoint_last.pt").is_file() else "ended, its records"
                print(f"{here}: placed from {out} (step {new}, {how})")
    return 0


def resumable(run_dirs: list[Path], limit_mib: float = 58) -> list[Path]:
    """The files that carry each unfinished run of ``run_dirs`` to another machine (``resume_files``), run by run in
    order while they fit ``limit_mib`` (a device call brings back 4 parts of 15 MiB beside the small files): what
    ``gpu_checks.sh`` packs for ``CKPTS``. A run left behind is said on stderr."""
    out: list[Path] = []
    total = 0
    for run_dir in run_dirs:
        files = resume_files(run_dir)
        size = sum(f.stat().st_size for f in files)
        if files and total + size > limit_mib * 2**20:
            print(f"{run_dir}: its checkpoints stay behind ({size / 2**20:.0f} MiB more than the {limit_mib:g} MiB "
                  f"a call brings back)", file=sys.stderr)
            continue
        total += size
        out += files
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("verb", choices=["list", "plan", "run", "compare", "status", "stage", "keep", "unpack",
                                     "resumable"])
    ap.add_argument("claim", nargs="?", help=f"one of {', '.join(sorted(CLAIMS))}; unpack: the device calls' "
                    "output folders; resumable: run folders")
    ap.add_argument("more", nargs="*", help=argparse.SUPPRESS)
    ap.add_argument("--logs", type=Path, help="unpack: copy each call's logs into LOGS/CALL (e.g. results/runs/device-calls/call-5)")
    ap.add_argument("--jobs", type=int, default=2, help="queues side by side (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of each run (OMP_NUM_THREADS; default 1): "
                    "jobs x threads up to the cores, e.g. --jobs 1 --threads 2 for the last run of a claim")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run of the claim (after its own), e.g. train.max_minutes=6")
    ap.add_argument("--device", help="train (train.device) and compare on this device, e.g. cuda")
    ap.add_argument("--seeds", type=int, help="seeds 1 .. N of every run instead of the claim's own number")
    ap.add_argument("--to", type=Path, default=Path(".carry"),
                    help="stage: the folder for the device call's carry (default .carry, git-ignored)")
    ap.add_argument("--only", metavar="RUN[,RUN..]", help="these runs of the claim alone, and the comparisons "
                    "between them (e.g. the LSTM of a claim on a GPU, its LSTMNs on a CPU)")
    args = ap.parse_args()
    if args.verb == "resumable":  # gpu_checks.sh's CKPTS: what to pack, a file a line
        print(*resumable([Path(d) for d in [args.claim, *args.more] if d]), sep="\n")
        return 0
    if args.verb != "unpack" and (args.more or args.claim not in (None, *CLAIMS)):
        ap.error(f"{args.verb}: one claim, one of {', '.join(sorted(CLAIMS))} (not {' '.join([args.claim, *args.more])})")
    extra = extra_overrides(args.set, args.device)
    if args.verb == "list":
        for c in CLAIMS.values():
            total = sum(r.minutes * c.seeds_of(label) for label, r in c.runs.items())
            longest = max(sum(c.runs[label].minutes for label, _ in q) for q in queues(c, args.jobs))
            cost = f"{c.seeds} seeds, ~{total:.0f} core-min, ~{longest:.0f} min on {args.jobs} cores"
            print(f"{c.name:24s} {cost}: {c.says}")
        return 0
    if args.verb == "status":
        named = [CLAIMS[args.claim]] if args.claim else list(CLAIMS.values())
        print("\n".join(status(c if args.seeds is None else replace(c, seeds=args.seeds)) for c in named))
        return 0
    if args.verb == "unpack":
        if args.claim is None:
            ap.error("unpack needs the device calls' output folders (each with runs.tgz), oldest first")
        return unpack([Path(args.claim), *map(Path, args.more)], args.logs)
    if args.claim is None:
        ap.error(f"{args.verb} needs a claim: {', '.join(sorted(CLAIMS))}")
    claim = CLAIMS[args.claim] if args.seeds is None else replace(CLAIMS[args.claim], seeds=args.seeds)
    if args.only:
        try:
            claim = only(claim, args.only.split(","))
        except KeyError as e:
            ap.error(f"--only: {claim.name} has no run {e.args[0]!r} (its runs: {', '.join(claim.runs)})")
    if args.threads < 1:
        ap.error(f"--threads: at least 1 (got {args.threads})")
    if args.verb == "plan":
        print(plan(claim, args.jobs, extra, args.device, args.threads))
        return 0
    if args.verb == "stage":
        return stage(claim, args.to)
    if args.verb == "keep":
        return keep(claim)
    for run_dir in restore(claim):
        print(f"{run_dir}: put back from {kept(run_dir)} (compared from its records)", flush=True)
    if args.verb == "compare":  # record the comparisons again from ended runs (a new test, say), no row, no training
        unended = [d for d in claim.run_dirs() if not (d / "final.json").is_file()]
        if unended:
            print(f"compare: {unended[0]} has not ended (no final.json); `run` trains it first", file=sys.stderr)
            return 1
        return finish(claim, args.jobs, extra, args.device, {**os.environ, "OMP_NUM_THREADS": str(args.threads)},
                      rows=False)
    return run(claim, args.jobs, extra, args.device, args.threads)


if __name__ == "__main__":
    sys.exit(main())
