import pytest
import torch

from memread.modules.attention import AdditiveAttention, BilinearAttention, DotAttention, build_attention
from memread.modules.masking import last_real, lengths_to_mask, masked_mean, masked_softmax


def test_lengths_to_mask_true_marks_real_prefix():
    mask = lengths_to_mask(torch.tensor([3, 1, 0]), 4)
    assert mask.tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]


def test_masked_softmax_zero_on_padding_and_no_nan_on_empty_rows():
    scores = torch.tensor([[1.0, 2.0, 3.0], [5.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[True, True, False], [True, False, False], [False, False, False]])
    w = masked_softmax(scores, mask)
    assert torch.allclose(w[0], torch.cat([torch.softmax(torch.tensor([1.0, 2.0]), 0), torch.zeros(1)]))
    assert w[1].tolist() == [1.0, 0.0, 0.0]
    assert w[2].tolist() == [0.0, 0.0, 0.0]


def test_masked_mean_and_last_real():
    x = torch.arange(12, dtype=torch.float).view(1, 4, 3).repeat(2, 1, 1)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    assert masked_mean(x, mask)[0].tolist() == [1.5, 2.5, 3.5]
    assert last_real(x, mask)[0].tolist() == [3.0, 4.0, 5.0]
    assert last_real(x, mask)[1].tolist() == [9.0, 10.0, 11.0]


def test_additive_attention_matches_its_formula():
    torch.manual_seed(0)
    att = AdditiveAttention(key_size=4, query_size=3, hidden_size=5).double()
    keys, q = torch.randn(2, 6, 4).double(), torch.randn(2, 3).double()
    mask = lengths_to_mask(torch.tensor([6, 4]), 6)
    w = att(q, keys, mask)
    for b in range(2):
        n = int(mask[b].sum())
        scores = torch.stack([att.v.weight[0] @ torch.tanh(att.W_k.weight @ keys[b, i] + att.W_q.weight @ q[b] + att.W_q.bias) for i in range(n)])
        assert torch.allclose(w[b, :n], torch.softmax(scores, 0))
        assert (w[b, n:] == 0).all()


def test_bilinear_with_bias_and_dot_match_their_formulas():
    torch.manual_seed(0)
    keys, q = torch.randn(2, 5, 4).double(), torch.randn(2, 3).double()
    bil = BilinearAttention(4, 3).double()
    expected = torch.einsum("bsk,bk->bs", keys, q @ bil.A.weight.T + bil.A.bias)
    assert torch.allclose(bil(q, keys), torch.softmax(expected, -1))
    q4 = torch.randn(2, 4).double()
    assert torch.allclose(DotAttention()(q4, keys), torch.softmax(torch.einsum("bsk,bk->bs", keys, q4), -1))


def test_projected_keys_are_reused():
    att = build_attention("additive", 4, 3, 8)
    keys, q = torch.randn(2, 5, 4), torch.randn(2, 3)
    assert torch.allclose(att(q, keys), att(q, keys, projected_keys=att.project_keys(keys)))
    with pytest.raises(ValueError):
        build_attention("dot", 4, 3)


def test_additive_attention_scores_many_queries_as_one_at_a_time():
    torch.manual_seed(0)
    att = AdditiveAttention(5, 3, 4).double()
    keys, queries = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 7, 3, dtype=torch.float64)
    projected = att.project_keys(keys)
    many = att.score_queries(queries, projected)  # (B, T, S)
    one = torch.stack([att.score(queries[:, t], projected) for t in range(7)], dim=1)
    assert many.shape == (2, 7, 6) and torch.allclose(many, one, atol=1e-12)
