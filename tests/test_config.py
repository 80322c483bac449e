from pathlib import Path

import pytest

from memread.config import TrainConfig, load_experiment, parse_override
from memread.errors import MemreadError

REPO = Path(__file__).parent.parent

GOOD = """
[data]
name = "stories-text"
[head]
name = "lm"
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
    assert cfg.head.emb == 16 and cfg.reader.hidden == 16 and cfg.task == "lm"
    assert cfg.criterion.name == "lm_nll"  # [criterion] left out: the dataset's default
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
    with pytest.raises(MemreadError, match=r"missing section \[head\]"):
        load_experiment(write(tmp_path, GOOD.replace('[head]\nname = "lm"\nemb = 16\n', "")))
    with pytest.raises(MemreadError, match="key 'data.name' must be one of"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"imagenet"')))


def test_every_section_is_airtight(tmp_path):
    """A key that does not apply to the chosen dataset, head or criterion is refused, naming it."""
    with pytest.raises(MemreadError, match=r"unknown key 'data.documents'"):  # ptb is one stream
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"ptb"\ndocuments = true')))
    with pytest.raises(MemreadError, match=r"unknown key 'data.stories'"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"ptb"\nstories = 10')))
    with pytest.raises(MemreadError, match=r"unknown key 'criterion.emb_l2'"):
        load_experiment(write(tmp_path, GOOD + '[criterion]\nname = "lm_nll"\nemb_l2 = 1e-4\n'))
    with pytest.raises(MemreadError, match=r"head 'pointer' does not serve 'lm' data.*heads for it: lm"):
        load_experiment(write(tmp_path, GOOD.replace('name = "lm"', 'name = "pointer"')))
    with pytest.raises(MemreadError, match=r"criterion 'cloze_nll' does not serve 'lm' data.*lm_nll"):
        load_experiment(write(tmp_path, GOOD + '[criterion]\nname = "cloze_nll"\n'))
    with pytest.raises(MemreadError, match=r"data.documents = true needs a reader that resets"):
        load_experiment(write(tmp_path, GOOD.replace('"stories-text"', '"stories-text"\ndocuments = true')))


LEGACY = """
[task]
name = "lm"
dataset = "stories"
stories = 50
emb = 16
dropout = 0.3
loss_reduction = "token"
[reader]
name = "lstm"
hidden = 16
"""


def test_the_earlier_task_form_is_translated(tmp_path):
    old = load_experiment(write(tmp_path, LEGACY))
    new = load_experiment(write(tmp_path, """
[data]
name = "stories-text"
stories = 50
[head]
name = "lm"
emb = 16
dropout = 0.3
[criterion]
name = "lm_nll"
reduction = "token"
[reader]
name = "lstm"
hidden = 16
"""))
    assert old == new
    assert load_experiment(write(tmp_path, LEGACY), ["data.bptt=7", "head.emb=8"]).data.bptt == 7  # --set: new names
    assert load_experiment(write(tmp_path, LEGACY), ["task.bptt=9"]).data.bptt == 9  # or the file's own
    with pytest.raises(MemreadError, match=r"\[task\] \(the earlier form\) and \[data\] cannot mix.*data.KEY"):
        load_experiment(write(tmp_path, GOOD), ["task.bptt=9"])
    with pytest.raises(MemreadError, match=r"unknown key 'task.bogus'"):
        load_experiment(write(tmp_path, LEGACY.replace("emb = 16", "emb = 16\nbogus = 1")))
    with pytest.raises(MemreadError, match=r"key 'task.story_seed' does not apply to this experiment"):
        load_experiment(write(tmp_path, LEGACY.replace('dataset = "stories"\nstories = 50', 'dataset = "ptb"\nstory_seed = 3')))
    # an earlier key at its earlier default that does not apply (run directories wrote every key): dropped
    assert load_experiment(write(tmp_path, LEGACY.replace('dataset = "stories"\nstories = 50', 'dataset = "ptb"\nstory_seed = 0'))).data.name == "ptb"


def test_bad_toml_names_file_and_line(tmp_path):
    with pytest.raises(MemreadError, match=r"exp.toml: not valid TOML: .*line 3"):
        load_experiment(write(tmp_path, "[data]\nname = 'ptb'\nbptt = = 3\n"))


def test_overrides(tmp_path):
    cfg = load_experiment(write(tmp_path, GOOD), ["train.lr=0.5", "reader.layers=2", "train.optimizer=sgd"])
    assert cfg.train.lr == 0.5 and cfg.reader.layers == 2 and cfg.train.optimizer == "sgd"
    assert parse_override("data.name=ptb") == (["data", "name"], "ptb")
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
    assert cfg.task and cfg.reader.name and cfg.head.name and cfg.criterion.name
