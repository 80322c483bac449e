"""Real Penn Treebank from the data root: official counts, and a few real training steps."""

import pytest

from memread.config import ExperimentConfig, TrainConfig
from memread.data.ptb import ptb_path, read_ptb
from memread.experiment import start_run
from memread.readers.rnn import RNNReaderConfig
from memread.criteria.lm import LMNLLConfig
from memread.data.pipelines.lm import LMPipeline, PTBConfig
from memread.heads.lm import LMHeadConfig


def test_ptb_counts_match_the_official_ones(real_data):
    root = real_data("ptb/ptb.train.txt.gz", "ptb/ptb.valid.txt.gz", "ptb/ptb.test.txt.gz")
    counts = {split: len(read_ptb(ptb_path(root, split))) for split in ("train", "valid", "test")}
    assert counts == {"train": 929_589, "valid": 73_760, "test": 82_430}
    task = LMPipeline(PTBConfig(), root)
    assert len(task.vocab) == 10_001  # 10k PTB words (incl. <unk>, <eos>) + <pad>
    assert task.batches("test", 1).n_targets == 82_429


@pytest.mark.slow  # 30 steps on real PTB
def test_a_few_real_ptb_steps_lower_the_loss(real_data, tmp_path):
    root = real_data("ptb/ptb.train.txt.gz")
    cfg = ExperimentConfig(
        data=PTBConfig(bptt=20), reader=RNNReaderConfig(hidden=32), head=LMHeadConfig(emb=32), criterion=LMNLLConfig(),
        train=TrainConfig(optimizer="sgd", lr=0.65, batch_size=20, max_steps=30, log_every=10,
                          eval_batch_size=400, progress=False),
    )
    trainer = start_run(cfg, tmp_path / "run", root)
    trainer.fit()
    import json

    train = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    ppl = [r["train_ppl"] for r in train if r["event"] == "train"]
    assert ppl[-1] < 0.5 * ppl[0] and ppl[0] > 1000  # from near-uniform over 10k words to well below
