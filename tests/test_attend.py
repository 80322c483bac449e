"""``memread.tools.attend.attend``: a run of an attention reader gives a PNG of its intra-attention; a run
of a reader without attention, or something that is not a run, gives a clear error."""

from __future__ import annotations

import pytest
import torch

from memread.tools.attend import attend, read_sentence
from memread.config import ExperimentConfig, TrainConfig
from memread.errors import MemreadError
from memread.experiment import load_trained, start_run
from memread.readers.lstmn import LSTMNConfig
from memread.readers.rnn import RNNReaderConfig
from memread.criteria.lm import LMNLLConfig
from memread.data.pipelines.lm import StoriesTextConfig
from memread.heads.lm import LMHeadConfig


def tiny_run(tmp_path, reader, name):
    cfg = ExperimentConfig(
        data=StoriesTextConfig(stories=20, bptt=12), reader=reader, head=LMHeadConfig(emb=8), criterion=LMNLLConfig(),
        train=TrainConfig(batch_size=8, eval_batch_size=8, epochs=1, max_steps=3, progress=False, log_every=100),
    )
    run_dir = tmp_path / name
    start_run(cfg, run_dir, tmp_path).fit()  # the stories are generated: no data needed
    return run_dir


def test_attend_writes_a_png(tmp_path):
    run_dir = tiny_run(tmp_path, LSTMNConfig(hidden=8, layers=2, span=6), "lstmn")
    png = attend(run_dir, "Mary put the zorblax in the kitchen .", tmp_path / "pics" / "a.png", tmp_path)
    assert png == tmp_path / "pics" / "a.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert attend(run_dir, "john went to the garden", None, tmp_path) == run_dir / "attention.png"

    _, task, model = load_trained(run_dir, tmp_path)
    words, w = read_sentence(model, task.vocab, "Mary put the zorblax in the kitchen .")
    assert words[0] == "Mary" and words[3] == "zorblax*"  # lower-cased to find "mary"; unknown marked
    assert w.shape == (8, 8)
    assert torch.all(w.triu() == 0)  # only earlier words, and the first word has nothing to read
    torch.testing.assert_close(w[1:].sum(-1), torch.ones(7))  # span 6: all within reach here


def test_the_picture_explains_the_mark_on_unknown_words(tmp_path, monkeypatch):
    """A word the vocabulary lacks is drawn as ``word*``, and the picture says what ``*`` means (and which words)."""
    import memread.tools.viz as viz

    titles = []
    real_save = viz.save

    def save(fig, path, **kw):
        titles.append([ax.get_title() for ax in fig.axes])
        return real_save(fig, path, **kw)

    monkeypatch.setattr(viz, "save", save)
    run_dir = tiny_run(tmp_path, LSTMNConfig(hidden=8, span=6), "lstmn")
    attend(run_dir, "Mary put the zorblax in the blorf zorblax", tmp_path / "a.png", tmp_path)
    assert titles[-1][0].endswith("\n* not in the model's vocabulary: read as <unk> (zorblax, blorf)")
    attend(run_dir, "Mary went to the kitchen", tmp_path / "b.png", tmp_path)  # every word known: no legend
    assert "\n" not in titles[-1][0] and "<unk>" not in titles[-1][0]


def test_attend_needs_an_attention_reader(tmp_path):
    run_dir = tiny_run(tmp_path, RNNReaderConfig(name="lstm", hidden=8), "lstm")
    with pytest.raises(MemreadError, match="no attention"):
        attend(run_dir, "mary went to the garden", tmp_path / "x.png", tmp_path)
    with pytest.raises(MemreadError):
        attend(tmp_path / "nothing-here", "mary", tmp_path / "x.png", tmp_path)
