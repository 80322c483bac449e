"""``memread config schema`` and ``memread config show``: the JSON Schema of experiment files is generated from the
config dataclasses (types, ranges, choices, defaults, comments), every shipped config validates against it, a wrong
key / type / range / choice is refused by it as by memread, and ``show`` writes TOML that loads back the same."""

from __future__ import annotations

import copy
import dataclasses
import json
import tomllib
import typing
from pathlib import Path

import pytest

from memread import cli
from memread.config import TrainConfig, experiment_from_dict, field_comments, load_experiment
from memread.errors import MemreadError
from memread.schema import experiment_schema, show_toml
from memread.typed import Range

jsonschema = pytest.importorskip("jsonschema")

REPO = Path(__file__).parent.parent
CONFIGS = sorted((REPO / "configs").rglob("*.toml"))
BASE = REPO / "configs" / "ptb" / "lstm.toml"


@pytest.fixture(scope="module")
def schema():
    out = experiment_schema()
    jsonschema.Draft7Validator.check_schema(out)
    return out


@pytest.fixture(scope="module")
def validator(schema):
    return jsonschema.Draft7Validator(schema)


def registries():
    from memread.criteria import CRITERIA
    from memread.data.pipelines import DATASETS
    from memread.heads import HEADS
    from memread.readers import READERS

    return {"data": DATASETS, "reader": READERS, "head": HEADS, "criterion": CRITERIA}


def test_every_shipped_config_validates(validator):
    assert len(CONFIGS) > 50
    for path in CONFIGS:
        errors = [e.message for e in validator.iter_errors(tomllib.loads(path.read_text()))]
        assert not errors, f"{path.relative_to(REPO)}: {errors[:3]}"


def test_every_choice_and_key_comes_from_the_dataclasses_with_its_default_and_comment(schema):
    defs = schema["definitions"]
    sections = {**{f"{s}.{n}": e.Config for s, r in registries().items() for n, e in r.items()}, "train": TrainConfig}
    assert set(defs) == set(sections)
    for key, cls in sections.items():
        props = defs[key]["properties"]
        assert set(props) == {f.name for f in dataclasses.fields(cls)} and defs[key]["additionalProperties"] is False
        defaults = {f.name: json.loads(json.dumps(f.default if f.default_factory is dataclasses.MISSING
                                                   else f.default_factory())) for f in dataclasses.fields(cls)}
        comments = field_comments(cls)
        for name, prop in props.items():
            if name == "name":
                assert prop == {"const": key.split(".", 1)[1]}
                continue
            assert prop["default"] == defaults[name], f"{key}.{name}"
            assert prop.get("description", "") == comments.get(name, ""), f"{key}.{name}"
    for section, registry in registries().items():
        assert schema["properties"][section]["properties"]["name"]["enum"] == list(registry)


def test_types_ranges_and_choices_come_from_the_annotations(schema):
    train = schema["definitions"]["train"]["properties"]
    assert train["batch_size"] == {"type": "integer", "minimum": 1, "default": 32,
                                   "description": train["batch_size"]["description"]}
    assert train["lr"]["type"] == "number" and train["lr"]["exclusiveMinimum"] == 0 and "maximum" not in train["lr"]
    assert (train["momentum"]["minimum"], train["momentum"]["exclusiveMaximum"]) == (0, 1)  # Probability: [0, 1)
    assert (train["lr_decay"]["exclusiveMinimum"], train["lr_decay"]["maximum"]) == (0, 1)  # Fraction: (0, 1]
    assert train["optimizer"]["enum"] == ["sgd", "adam"] and train["precision"]["enum"] == ["32", "bf16-mixed", "16-mixed"]
    assert train["betas"]["items"] == [{"type": "number", "minimum": 0, "exclusiveMaximum": 1}] * 2
    assert (train["betas"]["minItems"], train["betas"]["maxItems"]) == (2, 2)
    assert train["lr_scale"]["additionalProperties"] == {"type": "number", "minimum": 0}
    assert train["loggers"] == {"type": "array", "items": {"enum": ["mlflow", "wandb"]}, "default": [],
                                "description": train["loggers"]["description"]}
    assert train["device"]["pattern"] == r"^(?:auto|cpu|mps|cuda(:[0-9]+)?)$"
    # every Range of every section is in its property, as memread's check reads it
    for key, d in schema["definitions"].items():
        cls = TrainConfig if key == "train" else registries()[key.split(".")[0]][key.split(".", 1)[1]].Config
        for name, hint in typing.get_type_hints(cls, include_extras=True).items():
            ranges = [x for x in getattr(hint, "__metadata__", ()) if isinstance(x, Range)]
            for r in ranges:
                prop = d["properties"][name]
                if r.lo is not None:
                    assert prop["exclusiveMinimum" if r.lo_open else "minimum"] == r.lo, f"{key}.{name}"
                if r.hi is not None:
                    assert prop["exclusiveMaximum" if r.hi_open else "maximum"] == r.hi, f"{key}.{name}"


def with_value(raw: dict, section: str, key: str, value) -> dict:
    out = copy.deepcopy(raw)
    if key is None:
        out[section] = value
    elif value is DELETE:
        out.setdefault(section, {}).pop(key, None)
    else:
        out.setdefault(section, {})[key] = value
    return out


class _Delete:
    """A value that means: remove the key."""

    def __repr__(self) -> str:
        return "DELETE"  # a stable test id (pytest-xdist's workers must collect the same ids)


DELETE = _Delete()

REFUSED = [  # (section, key, value): refused by memread and by the schema alike
    ("train", "lrr", 0.1),  # unknown key
    ("train", "lr", "fast"),  # wrong type
    ("train", "batch_size", 1.5),
    ("train", "progress", 1),
    ("train", "batch_size", 0),  # out of range: PositiveInt
    ("train", "lr", 0),  # PositiveFloat: greater than 0
    ("train", "momentum", 1.0),  # Probability: below 1
    ("train", "lr_decay", 0.0),  # Fraction: above 0
    ("train", "betas", [0.9]),  # a pair
    ("train", "betas", [0.9, 1.5]),
    ("train", "lr_scale", {"*.v": -1.0}),
    ("train", "optimizer", "rmsprop"),  # a choice
    ("train", "loggers", ["comet"]),
    ("train", "device", "gpu"),  # a pattern
    ("head", "dropout", 1.0),
    ("head", "emb", -3),
    ("head", "tie", True),  # the lm head has no such key
    ("reader", "hidden", 0),
    ("reader", "name", "transformer"),  # no such reader
    ("reader", "attention_window", 3),  # a key of another reader
    ("data", "bptt", 0),
    ("data", "name", "mnist"),
    ("head", "name", "mlp"),  # a head that does not serve language modelling
    ("criterion", "name", "cross_entropy"),  # nor a criterion
    ("task", None, {"name": "lm"}),  # a section [task] beside the new ones
    ("extra", None, {}),  # an unknown section
    ("reader", None, DELETE),  # a section that is needed
]
ACCEPTED = [
    ("train", "lr", 1),  # an integer where a float is read
    ("train", "momentum", 0.0),  # the closed end of [0, 1)
    ("train", "lr_decay", 1.0),  # the closed end of (0, 1]
    ("train", "loggers", ["wandb", "mlflow"]),
    ("train", "device", "cuda:1"),
    ("train", "lr_scale", {"*.v": 0.5}),
    ("head", "name", DELETE),  # the task's default head: its keys are checked
    ("criterion", None, {"reduction": "token"}),  # the dataset's default criterion, no name
]


def _refused_by_memread(raw: dict) -> bool:
    try:
        experiment_from_dict(raw, "x.toml")
    except MemreadError:
        return True
    return False


@pytest.mark.parametrize("section,key,value", REFUSED, ids=lambda v: str(v))
def test_a_wrong_key_type_range_or_choice_is_refused_by_the_schema_as_by_memread(validator, section, key, value):
    raw = with_value(tomllib.loads(BASE.read_text()), section, key, value)
    if section == "reader" and key is None:
        raw.pop("reader")
    assert _refused_by_memread(raw)
    assert list(validator.iter_errors(raw)), f"the schema accepts {section}.{key} = {value!r}"


@pytest.mark.parametrize("section,key,value", ACCEPTED, ids=lambda v: str(v))
def test_what_memread_accepts_the_schema_accepts(validator, section, key, value):
    raw = with_value(tomllib.loads(BASE.read_text()), section, key, value)
    assert not _refused_by_memread(raw)
    assert not [e.message for e in validator.iter_errors(raw)]


def test_a_head_without_a_name_is_checked_as_the_datas_default_head(validator):
    raw = tomllib.loads(BASE.read_text())
    raw["head"] = {"emb": 64}  # lm's key: fine
    assert not list(validator.iter_errors(raw)) and not _refused_by_memread(raw)
    raw["head"] = {"hidden": 64}  # mlp's key, not lm's
    assert list(validator.iter_errors(raw)) and _refused_by_memread(raw)


def test_config_schema_writes_the_schema(tmp_path, capsys, schema):
    assert cli.main(["config", "schema", "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == schema
    assert cli.main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema


def test_config_show_prints_every_key_and_loads_back_the_same(tmp_path, capsys):
    for path in CONFIGS:
        assert cli.main(["config", "show", str(path)]) == 0
        text = capsys.readouterr().out
        cfg = load_experiment(path)
        assert experiment_from_dict(tomllib.loads(text), "shown") == cfg, path
        shown = tomllib.loads(text)
        assert {s: set(t) for s, t in shown.items()} == {s: set(t) for s, t in cfg.to_dict().items()}  # every key
    sets = ["--set", 'train.lr_scale={"*.v" = 0.1, "é\\"x" = 0.5}', "--set", 'train.loggers=["mlflow"]',
            "--set", "train.lr=2e-05"]
    assert cli.main(["config", "show", str(BASE), *sets]) == 0
    text = capsys.readouterr().out
    cfg = load_experiment(BASE, sets[1::2])
    assert cfg.train.lr_scale == {"*.v": 0.1, 'é"x': 0.5}
    (tmp_path / "shown.toml").write_text(text, encoding="utf-8")
    assert load_experiment(tmp_path / "shown.toml") == cfg
    assert cli.main(["config", "show", str(BASE), "--json", *sets]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(cfg.to_json())


def test_config_show_of_a_bad_config_is_memreads_one_line(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text(BASE.read_text() + "\n[extra]\n")
    assert cli.main(["config", "show", str(tmp_path / "bad.toml")]) == 2
    assert "unknown section 'extra'" in capsys.readouterr().err


def test_show_toml_names_its_source():
    assert show_toml(load_experiment(BASE), "configs/ptb/lstm.toml").startswith("# configs/ptb/lstm.toml: every key")
