"""Data pipelines, one file per task shape, and the explicit registry of datasets (``[data] name = ...``).

``DATASETS[name]`` is a :class:`DatasetSpec`: the ``[data]`` config class of that dataset (only its own
keys are accepted), the task shape it feeds, its default criterion, and the pipeline builder. The
datasets ``text``, ``jsonl-classify``, ``jsonl-pair``, ``jsonl-cloze``, ``jsonl-document`` and
``parallel`` read your own data, one plain format per task shape (:mod:`memread.data.records`).
"""

from __future__ import annotations

from memread.data.pipelines.base import DatasetSpec, Pipeline
from memread.data.pipelines.translation import IWSLT14Config, ParallelConfig, TranslationPipeline
from memread.data.pipelines.lm import CBTTextConfig, LMPipeline, PTBConfig, StoriesTextConfig, TextConfig, WikiTextConfig
from memread.data.pipelines.document import DocumentPipeline, IMDBAclConfig, JsonlDocumentConfig, TangConfig
from memread.data.pipelines.cloze import (BabiClozeConfig, BooksClozeConfig, ClozeFilesConfig, ClozePipeline,
                                          JsonlClozeConfig, StoriesClozeConfig)
from memread.data.pipelines.pair import JsonlPairConfig, PairPipeline, SNLIConfig, WikiQAConfig
from memread.data.pipelines.sentence import JsonlClassifyConfig, SentencePipeline, SSTConfig

DATASETS: dict[str, DatasetSpec] = {
    # language modelling (memread.data.pipelines.lm)
    "ptb": DatasetSpec(PTBConfig, "lm", LMPipeline, "lm_nll", "Penn Treebank, one continuous stream (Mikolov's splits)"),
    "wikitext-2": DatasetSpec(WikiTextConfig, "lm", LMPipeline, "lm_nll", "WikiText-2 articles, as a stream or as documents"),
    "wikitext-103": DatasetSpec(WikiTextConfig, "lm", LMPipeline, "lm_nll", "WikiText-103 articles, as a stream or as documents"),
    "stories-text": DatasetSpec(StoriesTextConfig, "lm", LMPipeline, "lm_nll", "the built-in stories as text"),
    "cbt-text": DatasetSpec(CBTTextConfig, "lm", LMPipeline, "lm_nll", "CBT-format files as text, each question's blank filled in"),
    # document sentiment (memread.data.pipelines.document)
    "imdb-acl": DatasetSpec(IMDBAclConfig, "document", DocumentPipeline, "rating", "aclImdb reviews as rated documents of sentences (8 star classes)"),
    "tang": DatasetSpec(TangConfig, "document", DocumentPipeline, "rating", "Tang et al. (2015) .ss files: Yelp / IMDB rated documents of sentences"),
    # cloze question answering (memread.data.pipelines.cloze)
    "stories": DatasetSpec(StoriesClozeConfig, "cloze", ClozePipeline, "cloze_nll", "the built-in stories with their cloze questions"),
    "cbt": DatasetSpec(ClozeFilesConfig, "cloze", ClozePipeline, "cloze_nll", "CBT-format cloze files (the Children's Book Test, memread's built sets)"),
    "books": DatasetSpec(BooksClozeConfig, "cloze", ClozePipeline, "cloze_nll", "cloze questions built from raw books by the CBT recipe, split by book"),
    "cnn": DatasetSpec(ClozeFilesConfig, "cloze", ClozePipeline, "cloze_nll", "CNN rc-data: folders of .question files"),
    "babi": DatasetSpec(BabiClozeConfig, "cloze", ClozePipeline, "cloze_nll", "bAbI tasks whose answer is a word of the story; accuracy per task"),
    # translation (memread.data.pipelines.translation)
    "iwslt14": DatasetSpec(IWSLT14Config, "translate", TranslationPipeline, "token_nll",
                           "IWSLT14 de-en (MIXER preprocessing) sentence pairs; trains on the valid file by default"),
    # sentence classification (memread.data.pipelines.sentence) and sentence pairs (memread.data.pipelines.pair)
    "sst": DatasetSpec(SSTConfig, "classify", SentencePipeline, "cross_entropy", "Stanford Sentiment Treebank: 5 classes or binary, sentences or every phrase"),
    "snli": DatasetSpec(SNLIConfig, "pair", PairPipeline, "cross_entropy", "SNLI premise/hypothesis pairs, 3 classes"),
    "wikiqa": DatasetSpec(WikiQAConfig, "pair", PairPipeline, "answer_selection", "WikiQA (candidate sentence, question) pairs, ranked per question"),
    # your own data, one plain format per task shape (memread.data.records)
    "text": DatasetSpec(TextConfig, "lm", LMPipeline, "lm_nll", "your plain text files: one sentence per line, blank lines between documents"),
    "jsonl-classify": DatasetSpec(JsonlClassifyConfig, "classify", SentencePipeline, "cross_entropy",
                                  "your JSON lines {text, label}: sentence classification"),
    "jsonl-pair": DatasetSpec(JsonlPairConfig, "pair", PairPipeline, "cross_entropy",
                              "your JSON lines {premise, hypothesis, label}, or {question, answer, label, qid} ranked "
                              "(kind = rank, criterion answer_selection)"),
    "jsonl-cloze": DatasetSpec(JsonlClozeConfig, "cloze", ClozePipeline, "cloze_nll",
                               "your JSON lines {document, query, candidates, answer}: cloze questions"),
    "jsonl-document": DatasetSpec(JsonlDocumentConfig, "document", DocumentPipeline, "rating",
                                  "your JSON lines {sentences (or text), label}: rated documents of sentences"),
    "parallel": DatasetSpec(ParallelConfig, "translate", TranslationPipeline, "token_nll",
                            "your line-aligned files PREFIX.src / PREFIX.tgt: sentence pairs to translate"),
    # >>> more task shapes register here
}

__all__ = ["DATASETS", "DatasetSpec", "Pipeline"]
