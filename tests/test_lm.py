"""The LSTM/RNN readers and the language-model task, against plain references."""

import math

import pytest
import torch
import torch.nn.functional as F

from memread.readers import READERS, build_reader
from memread.readers.base import detach_state, flatten_state, state_structure, unflatten_state
from memread.readers.rnn import RNNReaderConfig
from memread.criteria.lm import LMNLL, LMNLLConfig
from memread.data.pipelines.lm import LMPipeline, StoriesTextConfig
from memread.heads.lm import LanguageModel, LMHeadConfig


@pytest.mark.parametrize("name", ["lstm", "gru", "rnn"])
def test_rnn_reader_padding_and_single_example(name):
    torch.manual_seed(0)
    reader = build_reader(RNNReaderConfig(name=name, hidden=6, layers=2), 5).double()
    x = torch.randn(3, 7, 5, dtype=torch.float64)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5], dtype=torch.bool)
    out = reader(x, mask)
    for b in range(3):
        n = int(mask[b].sum())
        alone = reader(x[b : b + 1, :n], torch.ones(1, n, dtype=torch.bool))
        assert torch.allclose(out.states[b, :n], alone.states[0], atol=1e-10)
        final = alone.state[0] if name == "lstm" else alone.state
        carried = out.state[0] if name == "lstm" else out.state
        assert torch.allclose(carried[:, b], final[:, 0], atol=1e-10)  # state at the last real token


def test_carried_state_equals_one_pass_and_detaches():
    torch.manual_seed(0)
    reader = build_reader(RNNReaderConfig(hidden=6), 5).double()
    x = torch.randn(2, 10, 5, dtype=torch.float64)
    mask = torch.ones(2, 10, dtype=torch.bool)
    whole = reader(x, mask).states
    first = reader(x[:, :4], mask[:, :4])
    second = reader(x[:, 4:], mask[:, 4:], detach_state(first.state))
    assert torch.allclose(torch.cat([first.states, second.states], 1), whole)
    assert all(not t.requires_grad for t in detach_state(first.state))
    flat = flatten_state(first.state)
    again = unflatten_state(state_structure(first.state), flat)
    assert all(torch.equal(a, b) for a, b in zip(again, first.state))


def test_lm_loss_is_cross_entropy_and_perplexity_is_exp_mean_nll(tmp_path):
    torch.manual_seed(0)
    task = LMPipeline(StoriesTextConfig(stories=30, bptt=6), tmp_path)
    for reduction in ("sequence", "token"):
        model = LanguageModel(len(task.vocab), LMHeadConfig(emb=8), build_reader(RNNReaderConfig(hidden=8), 8)).eval()
        criterion = LMNLL(LMNLLConfig(reduction=reduction))
        batch = task.batches("valid", 3)[0]
        out = criterion(model(batch), batch)
        with torch.no_grad():
            logits = model.decoder(model.reader(model.embedding(batch["input"]), batch["mask"]).states)
            nll = F.cross_entropy(logits[batch["mask"]], batch["target"][batch["mask"]], reduction="sum")
        assert float(out.stats["nll"]) == pytest.approx(float(nll), rel=1e-5)
        denom = batch["input"].size(0) if reduction == "sequence" else int(batch["mask"].sum())
        assert float(out.value.detach()) == pytest.approx(float(nll) / denom, rel=1e-5)
    assert criterion.summarize({"nll": 20.0, "tokens": 10.0})["ppl"] == pytest.approx(math.exp(2.0))


def test_every_registered_reader_gets_gradients_in_every_parameter(tmp_path):
    task = LMPipeline(StoriesTextConfig(stories=30, bptt=6), tmp_path)
    for name, spec in READERS.items():
        cfg = spec.Config(name=name, **({"hidden": 12} if "hidden" in spec.Config.__dataclass_fields__ else {}))
        model = LanguageModel(len(task.vocab), LMHeadConfig(emb=8), build_reader(cfg, 8))
        batch = task.batches("train", 4)[0]
        LMNLL(LMNLLConfig())(model(batch), batch).value.backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
        assert not missing, f"{name}: no gradient for {missing}"
