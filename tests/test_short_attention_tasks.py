"""Daniluk et al. (2017) around the readers: documents (WikiText articles, stories) with resets,
CBT answered by a language model, attention by history position (Figure 3), and the CLI commands."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from memread.tools.attention_span import attention_by_position, document_attention, position_table
from memread.tools.cbt_lm import candidate_sequences, evaluate_cbt_file, score_candidates
from memread.data.cbt import read_cbt
from memread.data.stream import DocumentStreamBatches
from memread.data.vocab import Vocab
from memread.data.wikitext import map_numbers, read_wikitext, wikitext_path
from memread.errors import MemreadError
from memread.readers import build_reader
from memread.readers.attention_lm import AttentionLMConfig
from memread.readers.doc_lstm import DocLSTMConfig
from memread.readers.key_value_predict import KeyValuePredictConfig
from memread.readers.lstmn import LSTMNConfig
from memread.readers.ngram_rnn import NGramRNNConfig
from memread.readers.rnn import RNNReaderConfig
from memread.data.pipelines.lm import LMPipeline, PTBConfig, StoriesTextConfig, WikiTextConfig
from memread.heads.lm import LanguageModel, LMHeadConfig
from memread.tasks import Task
from memread.config import experiment_from_dict
from memread.training.loop import evaluate


# ----------------------------------------------------------------------------- documents


@pytest.mark.parametrize("batch,bptt", [(1, 4), (3, 5), (7, 3), (40, 20)])
def test_document_stream_scores_every_token_but_each_documents_first_once(batch, bptt):
    g = torch.Generator().manual_seed(batch)
    docs, base = [], 0
    for n in torch.randint(1, 30, (25,), generator=g).tolist():  # some one-token documents: nothing to predict
        docs.append(torch.arange(base, base + n))
        base += n + 100  # ids never continue across documents
    stream = DocumentStreamBatches(docs, batch, bptt)
    targets, starts = [], []
    for b in stream:
        m = b["mask"]
        assert not bool((b["reset"] & ~m).any())
        x, y = b["input"][m], b["target"][m]
        assert bool((y == x + 1).all())  # each target follows its input inside one document
        targets.extend(y.tolist())
        starts.extend(b["input"][b["reset"]].tolist())
    assert sorted(targets) == sorted(t for d in docs for t in d[1:].tolist())
    assert sorted(starts) == sorted(int(d[0]) for d in docs if d.numel() > 1)
    assert stream.n_targets == len(targets)
    if batch == 1:  # one column: the documents in order
        assert stream.input[0, stream.mask[0]].tolist() == [t for d in docs if d.numel() > 1 for t in d[:-1].tolist()]


def test_wikitext_articles_numbers_and_missing_files(fixtures, tmp_path):
    docs = read_wikitext(fixtures / "wikitext-2" / "wiki.test.tokens")
    assert len(docs) == 2  # the formula line "= 1 m / s and k =" is not an article title
    assert docs[0][:5] == ["<eos>", "=", "Epsilon", "Hill", "="] and docs[1][:4] == ["=", "Zeta", "Bridge", "="]
    assert map_numbers("in 1,450 and 1890 @.@ 5 , 3rd 12:30".split()) == "in N and N @.@ N , 3rd N".split()
    task = LMPipeline(WikiTextConfig(documents=True, numbers=True, bptt=4), fixtures)
    assert "N" in task.vocab and not any(w[0].isdigit() for w in task.vocab.itos)
    assert len(task.documents("train")) == 2 and len(task.documents("valid")) == 2
    b = task.batches("valid", 2)[0]
    assert b["reset"][:, 0].all()
    capped = LMPipeline(WikiTextConfig(max_vocab=20), fixtures)
    assert len(capped.vocab) == 20 and capped.vocab.unk_id == 1
    with pytest.raises(MemreadError, match=r"wikitext-103.*wiki\.train\.tokens.*wikitext-103-v1\.zip"):
        wikitext_path(tmp_path, "wikitext-103", "train")


def test_real_wikitext2_is_articles_with_the_official_token_counts(real_data):
    root = real_data("wikitext-2/wiki.valid.tokens.gz", "wikitext-2/wiki.test.tokens.gz")
    for split, tokens in (("valid", 217_646), ("test", 245_569)):
        docs = read_wikitext(wikitext_path(root, "wikitext-2", split))
        assert len(docs) == 60 and sum(map(len, docs)) == tokens
        assert all(d[d.index("=") + 1] != "=" for d in docs)  # every document starts at an article title
        vocab = Vocab.build(t for d in docs for t in d)
        stream = DocumentStreamBatches([torch.tensor(vocab.encode(d)) for d in docs], 64, 20)
        assert stream.n_targets == tokens - 60


def test_ptb_vocabulary_is_the_one_the_configs_were_matched_for(real_data):
    root = real_data("ptb")
    assert len(LMPipeline(PTBConfig(), root).vocab) == 10_001


def lm_task(data, root, reader=None, vocab=None) -> Task:
    """A language-model experiment over ``data`` (a [data] table) with an 8-wide embedding."""
    reader = reader or {"name": "doc_lstm" if data.get("documents") else "lstm", "hidden": 12}
    cfg = experiment_from_dict({"data": data, "reader": reader, "head": {"name": "lm", "emb": 8}}, "test")
    return Task(cfg, root, vocab=vocab)


def tiny_model(task, cfg):
    """``task``'s head around the reader ``cfg``, seeded."""
    return Task(dataclasses.replace(task.cfg, reader=cfg), None, data=task.data).build_model(0).eval()


def test_documents_make_perplexity_independent_of_how_the_split_is_batched(tmp_path):
    """With a reset at every document start, no token sees another document, so evaluating in 1 or
    in 5 columns gives the same perplexity, for every reader that resets (not so for a stream)."""
    task = lm_task({"name": "stories-text", "stories": 40, "bptt": 7, "documents": True}, tmp_path)
    for cfg in (DocLSTMConfig(hidden=12), AttentionLMConfig(hidden=12, window=4), KeyValuePredictConfig(hidden=12, window=2),
                NGramRNNConfig(hidden=12, n=3)):
        model = tiny_model(task, cfg)
        one, five = evaluate(model, task, "valid", 1), evaluate(model, task, "valid", 5)
        assert one["tokens"] == five["tokens"] == sum(len(d) - 1 for d in task.data.documents("valid"))
        assert one["ppl"] == pytest.approx(five["ppl"], rel=1e-5), cfg.name
    with pytest.raises(MemreadError, match="reader 'lstm' cannot.*doc_lstm, attention, kv, kvp, ngram"):
        lm_task({"name": "stories-text", "stories": 40, "bptt": 7, "documents": True}, tmp_path, {"name": "lstm"})
    ptb_like = lm_task({"name": "stories-text", "stories": 40, "bptt": 7}, tmp_path)
    assert "reset" not in ptb_like.batches("valid", 2)[0]  # a stream without documents is unchanged


@pytest.mark.slow  # evaluates all of WikiText-2's test split three times
def test_real_wikitext2_articles_are_read_apart(real_data):
    """The real WikiText-2 test articles (numbers as N, the valid split's 2,000 most frequent words; no
    train split here), read as documents by a key-value-predict LM whose window reaches back 5 outputs:
    in 3 or 7 columns of BPTT segments the perplexity is the same, so no article's tokens saw another's,
    while read as one stream the same model gives another perplexity."""
    root = real_data("wikitext-2/wiki.valid.tokens.gz", "wikitext-2/wiki.test.tokens.gz")
    data = {"name": "wikitext-2", "documents": True, "numbers": True, "bptt": 50}
    valid = map_numbers([t for d in read_wikitext(wikitext_path(root, "wikitext-2", "valid")) for t in d])
    vocab = Vocab.build(valid, max_size=2000, specials=("<pad>", "<unk>"))
    task = lm_task(data, root, vocab=vocab)
    model = tiny_model(task, KeyValuePredictConfig(hidden=12, window=5))
    with torch.no_grad():  # large weights: predictions that depend on the context (at init they are ~uniform)
        for p in model.parameters():
            p.uniform_(-1.0, 1.0)
    three, seven = evaluate(model, task, "test", 3), evaluate(model, task, "test", 7)
    assert three["tokens"] == seven["tokens"] == 245_569 - 60  # every token but each article's first
    assert three["ppl"] == pytest.approx(seven["ppl"], rel=1e-7)  # measured 5e-9
    stream = lm_task({**data, "documents": False}, root, vocab=vocab)
    as_stream = evaluate(model, stream, "test", 3)
    assert abs(as_stream["ppl"] / three["ppl"] - 1) > 1e-5  # measured 1e-4: only article starts differ


# ----------------------------------------------------------------------------- CBT with a language model


def cbt_vocab(*files):
    words = [w for f in files for ex in read_cbt(f) for w in (*ex.document, *ex.query, *ex.candidates, "<eos>")]
    return Vocab.build(words)


def naive_query_loglik(model, vocab, ex, cand):
    n_context, rows = candidate_sequences(ex, vocab)
    seq = torch.tensor(rows[ex.candidates.index(cand)])
    with torch.no_grad():
        states = model.read(seq[None, :-1], torch.ones(1, len(seq) - 1, dtype=torch.bool)).states
        logp = torch.log_softmax(model.decoder(states[0]), -1)
    return float(sum(logp[t, seq[t + 1]] for t in range(n_context - 1, len(seq) - 1)))


def test_cbt_scores_are_query_log_likelihoods_and_accuracy_is_per_file(fixtures):
    ne, p = fixtures / "cbt" / "cbtest_NE_fixture.txt", fixtures / "cbt" / "cbtest_P_fixture.txt"
    vocab = cbt_vocab(ne, p)
    examples = read_cbt(ne, context_lines=20) + read_cbt(p, context_lines=20)
    # the context read once and its state repeated per candidate == each candidate's whole sequence read
    for cfg in (KeyValuePredictConfig(hidden=12, window=3), AttentionLMConfig(hidden=12, window=4),
                NGramRNNConfig(hidden=12, n=3), DocLSTMConfig(hidden=12), RNNReaderConfig(hidden=12),
                LSTMNConfig(hidden=12, span=5)):
        torch.manual_seed(0)
        model = LanguageModel(len(vocab), LMHeadConfig(emb=8), build_reader(cfg, 8)).double().eval()
        scores = score_candidates(model, vocab, examples, questions_per_batch=3)  # padded, mixed-length batches
        for ex, s in zip(examples, scores):
            assert len(s) == len(ex.candidates)
            for cand, value in zip(ex.candidates, s):
                assert value == pytest.approx(naive_query_loglik(model, vocab, ex, cand), abs=1e-9), cfg.name
    torch.manual_seed(0)
    model = LanguageModel(len(vocab), LMHeadConfig(emb=8), build_reader(KeyValuePredictConfig(hidden=12, window=3), 8)).eval()
    # a model that always predicts one word picks it whenever it is a candidate
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.zero_()
        model.decoder.bias[vocab.id("Jack")] = 10.0
    r = evaluate_cbt_file(model, vocab, ne)
    assert r["subset"] == "NE" and r["questions"] == 2 and r["correct"] == 1 and r["accuracy"] == 0.5
    assert r["answer_in_vocab"] == 2 and r["accuracy_answer_in_vocab"] == 0.5
    small = Vocab([w for w in vocab.itos if w != "Jack"])  # "Jack" now reads as <unk>
    r = evaluate_cbt_file(LanguageModel(len(small), LMHeadConfig(emb=8), model.reader).eval(), small, ne)
    assert r["answer_in_vocab"] == sum(ex.answer != "Jack" for ex in read_cbt(ne, context_lines=20))
    with torch.no_grad():
        model.decoder.bias[vocab.id("Jack")] = 0.0
        model.decoder.bias[vocab.id("into")] = 10.0
    assert evaluate_cbt_file(model, vocab, p)["accuracy"] == 0.5  # "into" is the second query's answer only


def test_cbt_lm_reads_every_official_format_sample(real_data):
    root = real_data("cbt/format-samples")
    files = sorted((root / "cbt" / "format-samples").glob("cbtest_*.txt.gz"))
    assert len(files) == 12
    vocab = cbt_vocab(*files)
    torch.manual_seed(0)
    model = LanguageModel(len(vocab), LMHeadConfig(emb=8), build_reader(NGramRNNConfig(hidden=12, n=4), 8)).eval()
    subsets = set()
    for f in files:
        r = evaluate_cbt_file(model, vocab, f)
        assert r["questions"] == 1 and r["accuracy"] in (0.0, 1.0)
        subsets.add(r["subset"])
    assert subsets == {"NE", "CN", "V", "P"}


# ----------------------------------------------------------------------------- Figure 3


def test_attention_by_position_averages_full_windows_only(tmp_path):
    task = lm_task({"name": "stories-text", "stories": 40, "bptt": 7, "documents": True}, tmp_path)
    L = 4
    model = tiny_model(task, KeyValuePredictConfig(hidden=12, window=L))
    one = attention_by_position(model, task, "valid", batch_size=1)
    three = attention_by_position(model, task, "valid", batch_size=3)
    assert one["window"] == L and one["tokens"] == sum(max(0, len(d) - 1 - L) for d in task.data.documents("valid"))
    assert sum(one["weights"]) == pytest.approx(1.0, abs=1e-5)
    assert one["weights"] == pytest.approx(three["weights"], abs=1e-6) and one["tokens"] == three["tokens"]
    table = position_table({"kvp": one})
    assert "-4" in table and "-1" in table and f"{100 * one['weights'][-1]:5.1f}" in table
    words, weights = document_attention(model, task, "valid", document=2, tokens=12)
    assert len(words) == 12 and weights.shape == (12, L)
    assert float(weights[0].sum()) == 0.0 and float(weights[1].sum()) == pytest.approx(1.0)  # the first token sees nothing
    with pytest.raises(MemreadError, match="reports no attention weights"):
        attention_by_position(tiny_model(task, NGramRNNConfig(hidden=12, n=3)), task, "valid")


def test_attention_by_position_of_the_lstmn_tape_matches_reading_the_stream_at_once(tmp_path):
    """The LSTMN's tape starts empty and carries its last ``span`` slots across segments: the first
    segment is skipped (no band yet), every later token's weights on the previous 1..span tokens are
    averaged - the same numbers as reading the whole stream as one segment."""
    task = lm_task({"name": "stories-text", "stories": 40, "bptt": 7}, tmp_path)
    span = 4
    model = tiny_model(task, LSTMNConfig(hidden=12, span=span)).double()
    r = attention_by_position(model, task, "valid", batch_size=1)
    ids = task.data.ids("valid")
    N = len(ids) - 1  # inputs
    with torch.no_grad():
        att = model.read(ids[None, :N], torch.ones(1, N, dtype=torch.bool), return_attention=True).attention[0]  # (N, N)
    expect = torch.stack([att[t, t - span : t] for t in range(task.cfg.data.bptt, N)]).mean(0)  # [-span .. -1]
    assert r["window"] == span and r["tokens"] == N - task.cfg.data.bptt
    assert r["weights"] == pytest.approx(expect.tolist(), abs=1e-9)
    assert sum(r["weights"]) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- the commands


def test_commands_on_a_tiny_trained_run(tmp_path, fixtures, capsys):
    from memread.cli import main
    from memread.config import experiment_from_dict
    from memread.experiment import start_run

    raw = {"data": {"name": "stories-text", "stories": 40, "bptt": 7, "documents": True}, "head": {"name": "lm", "emb": 8},
           "reader": {"name": "kvp", "hidden": 12, "window": 3},
           "train": {"max_steps": 3, "batch_size": 4, "progress": False}}
    run = tmp_path / "kvp"
    trainer = start_run(experiment_from_dict(raw, "test"), run, tmp_path)
    trainer.fit()
    capsys.readouterr()
    data = ["--data-root", str(tmp_path)]
    assert main(["attention-span", str(run), "--split", "valid", "--out", str(tmp_path / "span"), "--tokens", "10", *data]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "-3" in out and "kvp" in out
    assert "attention_document_kvp.png" in captured.err  # it names the picture it wrote
    for png in ("attention_by_position.png", "attention_document_kvp.png"):
        assert (tmp_path / "span" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "span" / "attention_by_position.json").read_text())["runs"]["kvp"]["window"] == 3
    assert main(["cbt-lm", str(run), str(fixtures / "cbt" / "cbtest_P_fixture.txt"), "--checkpoint", "last", *data]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["subset"] == "P" and r["questions"] == 2 and 0.0 <= r["accuracy"] <= 1.0
    assert main(["match-params", "ngram", "--vocab", "77000", "--set", "n=5"]) == 0
    assert json.loads(capsys.readouterr().out)["hidden"] == 968
    assert main(["bench", "kvp", "--batch", "2", "--steps", "3", "--emb", "6", "--hidden", "6", "--vocab", "20",
                 "--repeats", "1", "--match-params"]) == 0
    b = json.loads(capsys.readouterr().out)
    from memread.params import match_lm_hidden

    assert b["matched_hidden"] == match_lm_hidden(KeyValuePredictConfig(), 20, 6, DocLSTMConfig(hidden=6)).hidden
    assert b["model_params"] == b["matched_params"] and b["target_params"] == b["lstm_model_params"]
    assert main(["cbt-lm", str(run), str(fixtures / "cbt" / "tiny.txt"), *data]) == 2  # CBT needs 20 context lines
    assert "expected 20" in capsys.readouterr().err


def test_attention_span_of_an_lstmn_run_claims_no_window_picture(tmp_path, capsys):
    """An LSTMN's tape starts empty, so there is no per-token window picture: none is written or named."""
    from memread.cli import main
    from memread.config import experiment_from_dict
    from memread.experiment import start_run

    raw = {"data": {"name": "stories-text", "stories": 40, "bptt": 7}, "head": {"name": "lm", "emb": 8},
           "reader": {"name": "lstmn", "hidden": 12, "span": 3},
           "train": {"max_steps": 2, "batch_size": 4, "progress": False}}
    run = tmp_path / "lstmn"
    start_run(experiment_from_dict(raw, "test"), run, tmp_path).fit()
    capsys.readouterr()
    out_dir = tmp_path / "span"
    assert main(["attention-span", str(run), "--split", "valid", "--out", str(out_dir), "--max-batches", "2",
                 "--data-root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "no per-token window picture" in err and "attention_document" not in err
    assert sorted(p.name for p in out_dir.iterdir()) == ["attention_by_position.json", "attention_by_position.png"]
    assert json.loads((out_dir / "attention_by_position.json").read_text())["runs"]["lstmn"]["window"] == 3
