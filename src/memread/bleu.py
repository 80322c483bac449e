"""Corpus BLEU through sacrebleu, on tokenized text.

The IWSLT14 data of :mod:`memread.data.iwslt` is already tokenized (Moses) and lowercased, and the
model writes tokens, so BLEU is computed on the tokens as they are: sacrebleu with ``tokenize =
"none"`` (what ``multi-bleu.perl``, the NSE paper's tool of the time, does on tokenized text), one
reference per sentence, case-sensitive (the text is lowercased anyway). sacrebleu's signature
(``nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:...``) is reported with every score, so the
setting is never ambiguous. Note that tokenized BLEU is not comparable with detokenized sacreBLEU
scores (``tok:13a``) reported elsewhere.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from memread.errors import MemreadError


@dataclass
class BleuResult:
    bleu: float  # 0 .. 100
    signature: str
    precisions: list[float]
    brevity_penalty: float
    hyp_len: int
    ref_len: int
    sentences: int

    def to_dict(self) -> dict:
        return asdict(self)


def corpus_bleu(hypotheses: list[str], references: list[str]) -> BleuResult:
    """Corpus BLEU of tokenized hypotheses against one tokenized reference each (strings of words
    separated by spaces)."""
    try:
        from sacrebleu.metrics import BLEU
    except ImportError:
        raise MemreadError("BLEU needs sacrebleu: pip install 'sacrebleu>=2.0'") from None
    if len(hypotheses) != len(references):
        raise MemreadError(f"BLEU: {len(hypotheses)} hypotheses but {len(references)} references")
    metric = BLEU(tokenize="none")
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return BleuResult(bleu=score.score, signature=str(metric.get_signature()), precisions=list(score.precisions),
                      brevity_penalty=score.bp, hyp_len=score.sys_len, ref_len=score.ref_len,
                      sentences=len(hypotheses))
