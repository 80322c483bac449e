from pathlib import Path

import pytest

from memread.config import TrainConfig, load_experiment, parse_override
from memread.errors import MemreadError

REPO = Path(__file__).parent.parent

GOOD = """
[task]
name = "lm"
dataset = "stories"
emb = 16
[reader]
name = "lstm"
hidden = 16
[train]
lr = 1
"""


def write(tmp_path, text):
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


def test_valid_file_is_typed(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD))
    assert cfg.task.emb == 16 and cfg.reader.hidden == 16
    assert isinstance(cfg.train.lr, float) and cfg.train.lr == 1.0  # int accepted for float
    assert cfg.train.optimizer == TrainConfig().optimizer


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(MemreadError, match=r"exp.toml: unknown key 'reader.hiden'"):
        load_experiment(write(tmp_path, GOOD.replace("hidden = 16", "hiden = 16")))


def test_wrong_type_is_named(tmp_path):
    with pytest.raises(MemreadError, match=r"key 'train.batch_size' expects int, got 'big'"):
        load_experiment(write(tmp_path, GOOD + 'batch_size = "big"\n'))
    with pytest.raises(MemreadError, match=r"key 'train.optimizer' expects 'sgd' or 'adam'"):
        load_experiment(write(tmp_path, GOOD + 'optimizer = "rmsprop"\n'))


def test_unknown_section_reader_and_task(tmp_path):
    with pytest.raises(MemreadError, match="unknown section 'model'"):
        load_experiment(write(tmp_path, GOOD + "[model]\nx = 1\n"))
    with pytest.raises(MemreadError, match="reader.name"):
        load_experiment(write(tmp_path, GOOD.replace('name = "lstm"', 'name = "transformer"')))


def test_bad_toml_names_file_and_line(tmp_path):
    with pytest.raises(MemreadError, match=r"exp.toml: not valid TOML: .*line 3"):
        load_experiment(write(tmp_path, "[task]\nname = 'lm'\nemb = = 3\n"))


def test_overrides(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD), ["train.lr=0.5", "reader.layers=2", "train.optimizer=sgd"])
    assert cfg.train.lr == 0.5 and cfg.reader.layers == 2 and cfg.train.optimizer == "sgd"
    assert parse_override("task.dataset=ptb") == (["task", "dataset"], "ptb")
    with pytest.raises(MemreadError, match="unknown key 'train.nope'"):
        load_experiment(write(tmp_path, GOOD), ["train.nope=1"])
    with pytest.raises(MemreadError, match="section.key=value"):
        parse_override("lr=0.5")


def test_lr_scale_is_a_typed_table(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD + 'lr_scale = { "*.v" = 0.1, "embedding.*" = 2 }\n'))
    assert cfg.train.lr_scale == {"*.v": 0.1, "embedding.*": 2.0} and isinstance(cfg.train.lr_scale["embedding.*"], float)
    assert load_experiment(write(tmp_path, GOOD), ['train.lr_scale={"*.v" = 0.5}']).train.lr_scale == {"*.v": 0.5}
    assert TrainConfig().lr_scale == {}
    with pytest.raises(MemreadError, match=r"key 'train.lr_scale.\*.v' expects float, got 'x'"):
        load_experiment(write(tmp_path, GOOD + 'lr_scale = { "*.v" = "x" }\n'))
    with pytest.raises(MemreadError, match=r"key 'train.lr_scale' expects table of str = float, got 0.1"):
        load_experiment(write(tmp_path, GOOD + "lr_scale = 0.1\n"))


@pytest.mark.parametrize("path", sorted((REPO / "configs").rglob("*.toml")), ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_config_is_valid(path):
    cfg = load_experiment(path)
    assert cfg.task.name and cfg.reader.name
