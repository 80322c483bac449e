"""Heads, one file per task shape, and the explicit registry that names them (``[head] name = ...``).

A head is everything an experiment puts around its reader: embeddings, output layers, a second reader,
a decoder. ``HEADS[name]`` is a :class:`HeadSpec`: its config class, the task shapes it serves and its
builder ``build(head_cfg, reader_cfg, pipeline) -> nn.Module``.
"""

from __future__ import annotations

from memread.heads.base import HeadSpec, ModelOutput
from memread.heads.translation import (AttentionDecoderHeadConfig, FusionHeadConfig, NSEDecoderHeadConfig,
                                       build_attention_translator, build_fusion_translator, build_nse_translator)
from memread.heads.lm import LMHeadConfig, build_lm_head
from memread.heads.hierarchical import HierarchicalHeadConfig, build_hierarchical_head
from memread.heads.cloze import (ASReaderHeadConfig, FinalStateHeadConfig, IAAHeadConfig, PointerHeadConfig,
                                 build_as_reader_head, build_final_state_head, build_iaa_head, build_pointer_head)
from memread.heads.classifier import MLPHeadConfig, build_mlp_head
from memread.heads.pair import PairHeadConfig, build_pair_head

HEADS: dict[str, HeadSpec] = {
    "lm": HeadSpec(LMHeadConfig, ("lm",), build_lm_head, "embedding -> reader -> dropout -> softmax over the vocabulary"),
    "hierarchical": HeadSpec(HierarchicalHeadConfig, ("document",), build_hierarchical_head,
                             "embedding -> sentence reader -> pool -> document reader -> pool -> softmax over the classes"),
    "pointer": HeadSpec(PointerHeadConfig, ("cloze",), build_pointer_head,
                        "embedding -> reader -> bilinear attention of the query over the document's states -> pointer-sum"),
    "final_state": HeadSpec(FinalStateHeadConfig, ("cloze",), build_final_state_head,
                            "embedding -> reader over document then query -> candidates scored from the final state"),
    "as_reader": HeadSpec(ASReaderHeadConfig, ("cloze",), build_as_reader_head,
                          "Attention-Sum Reader (Kadlec et al. 2016): query and document encoders, dot attention, pointer-sum"),
    "iaa": HeadSpec(IAAHeadConfig, ("cloze",), build_iaa_head,
                    "iterative alternating attention (Sordoni et al. 2016) over query and document encoders, pointer-sum"),
    # translation: the [reader] is the encoder, the head picks the decoder (memread.heads.translation)
    "attention_decoder": HeadSpec(AttentionDecoderHeadConfig, ("translate",), build_attention_translator,
                                  "encoder -> LSTM decoder with additive attention over its states (RNNSearch-like)"),
    "nse_decoder": HeadSpec(NSEDecoderHeadConfig, ("translate",), build_nse_translator,
                            "encoder -> NSE decoder reading and writing the encoder's final memory (NSE-NSE)"),
    "lstmn_shallow": HeadSpec(FusionHeadConfig, ("translate",), build_fusion_translator,
                              "LSTMN encoder -> LSTMN decoder, shallow attention fusion (Cheng et al. 2016)"),
    "lstmn_deep": HeadSpec(FusionHeadConfig, ("translate",), build_fusion_translator,
                           "LSTMN encoder -> LSTMN decoder, deep attention fusion (Cheng et al. 2016)"),
    # sentence classification and sentence pairs (memread.heads.classifier, memread.heads.pair)
    "mlp": HeadSpec(MLPHeadConfig, ("classify",), build_mlp_head, "embedding -> reader -> pool -> ReLU layer -> one output per class"),
    "pair": HeadSpec(PairHeadConfig, ("pair",), build_pair_head,
                     "embedding -> two texts read by one of 7 encoders -> pooled features -> ReLU layer -> classes or a score"),
    # >>> more task shapes register here
}

# the head an experiment without ``[head] name`` gets, by its dataset's task shape (as ``[criterion]`` defaults by
# dataset): each the plainest that serves the task with any reader
DEFAULT_HEADS: dict[str, str] = {"lm": "lm", "classify": "mlp", "pair": "pair", "cloze": "pointer",
                                 "translate": "attention_decoder", "document": "hierarchical"}


def heads_for(task: str) -> list[str]:
    """The heads that serve ``task``, its default first."""
    fits = sorted(n for n, h in HEADS.items() if task in h.tasks)
    return sorted(fits, key=lambda n: n != DEFAULT_HEADS.get(task))


__all__ = ["DEFAULT_HEADS", "HEADS", "HeadSpec", "ModelOutput", "heads_for"]
