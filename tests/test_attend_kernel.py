"""The fused attention read ``MemoryReads.attend`` (the compiled ``_attend_kernels.cpp``) against its
composition ``scores -> masked_softmax -> glimpse`` (``backend = "function"``): values and the gradients
of the memory, the key and everything downstream of the attention (used in its glimpse and elsewhere)
in float64, with padded slots, a row with one real slot and a row with none, a mask with holes, reads
without a glimpse; float32 at sizes that run the vector loops' remainders; two threads as one; the
whole IAA's loss and every parameter's gradient with the fused path on and off; and the fused path is
what the IAA runs where the kernel can be built (under CPU autocast too).
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from torch.utils import cpp_extension

import memread.modules.memory_reads as memory_reads
from memread._compiled import DISABLE_ENV
from memread.errors import MemreadError
from memread.heads.cloze import IAAHeadConfig
from memread.modules.masking import masked_softmax
from memread.modules.memory_reads import MemoryReads
from memread.heads.iaa import IterativeAlternatingAttention

FUSED = "_AttendBackward"


def needs_kernels():
    if memory_reads.kernels() is None:
        pytest.skip("the compiled attention read kernels are not available here (no compiler or ninja)")


def rand(*shape, seed, dtype=torch.float64):
    """The same numbers in every dtype (drawn in float64)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def prefix_mask(lengths, S):
    return torch.arange(S) < torch.tensor(lengths).unsqueeze(1)


def reads_loss(memory, key0, W, mask, fused, steps=3):
    """The shape of the IAA loop on one memory: attend, next key from the glimpse, ...; a last read
    without a glimpse; the attentions also used outside their glimpses; a use of the memory outside the
    reads. Returns the loss, the attentions and the glimpses."""
    reads = MemoryReads(memory, "compiled" if fused else "function")
    key, total, atts, reads_out = key0, 0, [], []
    for t in range(steps):
        att, glimpse = reads.attend(key, mask)
        if fused:
            assert type(att.grad_fn).__name__ == FUSED
        atts.append(att)
        reads_out.append(glimpse)
        total = total + (glimpse * rand(*glimpse.shape, seed=20 + t, dtype=glimpse.dtype)).sum() \
            + (att.sin() * rand(*att.shape, seed=30 + t, dtype=att.dtype)).sum()  # att used outside its glimpse too
        key = torch.tanh(glimpse @ W)
    att, none = reads.attend(key, mask, glimpse=False)
    assert none is None
    atts.append(att)
    total = total + (att * rand(*att.shape, seed=40, dtype=att.dtype)).sum()
    return total + memory.pow(2).sum(), atts, reads_out


def compare(B, S, E, mask, dtype, atol, rtol, memory=None):
    memory = rand(B, S, E, seed=1, dtype=dtype) if memory is None else memory
    key0, W = rand(B, E, seed=2, dtype=dtype), rand(E, E, seed=3, dtype=dtype) / E ** 0.5
    results = []
    for fused in (True, False):
        leaves = [x.detach().clone().requires_grad_(True) for x in (memory, key0, W)]
        loss, atts, glimpses = reads_loss(*leaves, mask, fused)
        grads = torch.autograd.grad(loss, leaves)
        results.append((loss, atts, glimpses, grads))
    (l1, a1, g1, d1), (l2, a2, g2, d2) = results
    torch.testing.assert_close(l1, l2, atol=atol, rtol=rtol)
    for x, y in zip([*a1, *g1], [*a2, *g2], strict=True):
        torch.testing.assert_close(x, y, atol=atol, rtol=rtol)
    for name, x, y in zip(["memory", "key", "W"], d1, d2, strict=True):
        torch.testing.assert_close(x, y, atol=atol, rtol=rtol, msg=lambda m: f"d{name}: {m}")
        assert x.abs().sum() > 0
    return a1, g1, d1


def test_fused_read_equals_the_composition_in_float64():
    """Padded slots, a row of one real slot (weight 1, no gradient through its softmax) and a row of none
    (zeros, as masked_softmax gives); E = 21 runs the vector loops and their remainder."""
    needs_kernels()
    S = 37
    mask = prefix_mask([37, 20, 1, 0, 17], S)
    atts, glimpses, _ = compare(5, S, 21, mask, torch.float64, atol=1e-12, rtol=1e-12)
    for att in atts:
        assert att[~mask].abs().sum() == 0 and att[3].abs().sum() == 0 and torch.all(att[2, 0] == 1)
        torch.testing.assert_close(att[[0, 1, 2, 4]].sum(-1), torch.ones(4, dtype=att.dtype), atol=1e-14, rtol=0)
    assert all(g[3].abs().sum() == 0 for g in glimpses)


def test_fused_read_with_a_mask_with_holes_and_no_mask():
    """masked_softmax takes any mask, not only right padding; and ``mask=None`` is every slot."""
    needs_kernels()
    mask = torch.rand(4, 40, generator=torch.Generator().manual_seed(5)) < 0.6
    mask[1] = False
    mask[1, 7] = True  # one real slot in the middle
    compare(4, 40, 16, mask, torch.float64, atol=1e-12, rtol=1e-12)
    compare(3, 19, 8, None, torch.float64, atol=1e-12, rtol=1e-12)


def test_fused_read_of_a_memory_that_is_not_contiguous():
    needs_kernels()
    memory = rand(3, 11, 29, seed=1).transpose(1, 2)  # (3, 29, 11), a view
    compare(3, 29, 11, prefix_mask([29, 4, 13], 29), torch.float64, atol=1e-12, rtol=1e-12,
            memory=memory)


@pytest.mark.parametrize("E", [37, 256])
def test_fused_read_equals_the_composition_in_float32(E):
    """float32, with its vectorised exp (within a few ulps of torch's) and other summation orders: to
    float32 precision. (The memory's entries of the size of a GRU's outputs: the composition itself is
    that far from float64.)"""
    needs_kernels()
    S = 70
    memory = rand(4, S, E, seed=1, dtype=torch.float32) / 2
    compare(4, S, E, prefix_mask([70, 33, 1, 50], S), torch.float32, atol=5e-5, rtol=1e-4, memory=memory)


def test_fused_read_with_only_one_of_its_outputs_used():
    """Backward with only the attention's gradient, or only the glimpse's; and without autograd."""
    needs_kernels()
    memory, key = rand(3, 9, 6, seed=1), rand(3, 6, seed=2)
    mask = prefix_mask([9, 1, 4], 9)
    for pick in (0, 1):
        grads = []
        for fused in (True, False):
            m, k = memory.clone().requires_grad_(True), key.clone().requires_grad_(True)
            out = MemoryReads(m, "compiled" if fused else "function").attend(k, mask)[pick]
            grads.append(torch.autograd.grad((out * rand(*out.shape, seed=9)).sum(), [m, k]))
        for x, y in zip(*grads, strict=True):
            torch.testing.assert_close(x, y, atol=1e-12, rtol=1e-12)
    with torch.no_grad():
        fused = MemoryReads(memory, "compiled").attend(key, mask)
        assert fused[0].grad_fn is None
    att = masked_softmax(torch.bmm(memory, key.unsqueeze(-1)).squeeze(-1), mask)
    torch.testing.assert_close(fused[0], att, atol=1e-14, rtol=0)
    torch.testing.assert_close(fused[1], torch.bmm(att.unsqueeze(1), memory).squeeze(1), atol=1e-14, rtol=0)


def test_fused_read_on_two_threads_equals_one_thread():
    """The kernel splits the rows between torch's threads; a row is one thread's: the same numbers."""
    needs_kernels()
    S = 45
    mask = prefix_mask([45, 3, 40, 1, 45, 12, 0, 44, 30, 45], S)
    before = torch.get_num_threads()

    def on(threads):
        torch.set_num_threads(threads)
        try:
            assert torch.get_num_threads() == threads
            return compare(10, S, 24, mask, torch.float64, atol=1e-12, rtol=1e-12)
        finally:
            torch.set_num_threads(before)

    one, two = on(1), on(2)
    for x, y in zip([*one[0], *one[1], *one[2]], [*two[0], *two[1], *two[2]], strict=True):
        assert torch.equal(x, y)


# ----------------------------------------------------------------------------- the IAA on the fused read


def iaa_and_inputs(fixed_query=False, dtype=torch.float64):
    torch.manual_seed(0)
    m = IterativeAlternatingAttention(IAAHeadConfig(steps=4, inference=5, gate_hidden=6, fixed_query=fixed_query,
                                                    dropout=0.0), enc_size=10).to(dtype)
    for p in m.parameters():
        torch.nn.init.normal_(p, 0.0, 0.5)  # large enough that every term matters
    q_len, d_len = [3, 5, 1, 4], [17, 4, 1, 9]
    q = rand(4, 5, 10, seed=1, dtype=dtype)
    d = rand(4, 17, 10, seed=2, dtype=dtype)
    return m, q, prefix_mask(q_len, 5), d, prefix_mask(d_len, 17)


def iaa_loss_and_grads(m, q, q_mask, d, d_mask, fused):
    m.backend = "compiled" if fused else "function"
    q, d = q.clone().requires_grad_(True), d.clone().requires_grad_(True)
    out = m(q, q_mask, d, d_mask, trace=True)
    if fused:
        assert type(out.doc_attention.grad_fn).__name__ == FUSED
    loss = (out.doc_attention.clamp_min(1e-30).log() * d_mask).sum() \
        + (out.doc_trace * rand(*out.doc_trace.shape, seed=5, dtype=d.dtype)).sum() \
        + (out.query_trace * rand(*out.query_trace.shape, seed=6, dtype=d.dtype)).sum()
    names = ["q_tilde", "d_tilde", *(n for n, _ in m.named_parameters())]
    return loss, dict(zip(names, torch.autograd.grad(loss, [q, d, *m.parameters()])))


@pytest.mark.parametrize("fixed_query", [False, True])
def test_iaa_loss_and_every_gradient_equal_with_the_fused_read_on_and_off(fixed_query):
    """The whole IAA (T = 4, the traces in the loss too) in float64, with padding and a row whose query
    and document have one real token each."""
    needs_kernels()
    m, q, q_mask, d, d_mask = iaa_and_inputs(fixed_query)
    loss_on, d_on = iaa_loss_and_grads(m, q, q_mask, d, d_mask, True)
    loss_off, d_off = iaa_loss_and_grads(m, q, q_mask, d, d_mask, False)
    torch.testing.assert_close(loss_on, loss_off, atol=1e-11, rtol=1e-12)
    assert d_on.keys() == d_off.keys()
    for name in d_on:
        torch.testing.assert_close(d_on[name], d_off[name], atol=1e-11, rtol=1e-10, msg=lambda s: f"{name}: {s}")
        assert d_on[name].abs().sum() > 0 or name.startswith("gru.H"), name


def test_the_fused_read_is_used_where_it_can_be_built():
    """Where a C++ compiler and ninja are present (and extensions are not switched off) the kernel builds,
    and the IAA's attention is the fused read, in float64, float32 and under CPU autocast (the loop in
    float32), not silently the composition."""
    buildable = shutil.which(os.environ.get("CXX", "c++")) is not None and cpp_extension.is_ninja_available()
    if not buildable or os.environ.get(DISABLE_ENV, "") not in ("", "0"):
        pytest.skip("no C++ compiler or ninja here, or the extensions are switched off")
    assert IAAHeadConfig().backend == "auto"
    assert memory_reads.kernels() is not None, "the attention read kernels failed to build"
    m, q, q_mask, d, d_mask = iaa_and_inputs()
    assert m.backend == "auto"
    out = m(q.requires_grad_(True), q_mask, d, d_mask, trace=True)
    assert type(out.doc_attention.grad_fn).__name__ == FUSED
    assert type(out.query_trace.grad_fn.next_functions[0][0]).__name__ == FUSED
    m32 = m.float()
    out32 = m32(q.detach().float().requires_grad_(True), q_mask, d.float(), d_mask)
    assert type(out32.doc_attention.grad_fn).__name__ == FUSED
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q16 = (q.detach().float().requires_grad_(True) * 1).to(torch.bfloat16)
        out16 = m32(q16, q_mask, d.bfloat16(), d_mask)
    assert out16.doc_attention.dtype == torch.float32
    assert type(out16.doc_attention.grad_fn).__name__ == FUSED


def test_without_the_kernel_the_composition_is_used(monkeypatch):
    """Where the kernel cannot be built (here: switched off as MEMREAD_NO_EXTENSIONS does), or for a dtype
    it does not take, ``attend`` is scores -> masked_softmax -> glimpse."""
    monkeypatch.setenv(DISABLE_ENV, "1")
    monkeypatch.setattr(memory_reads.kernels, "_tried", False)
    monkeypatch.setattr(memory_reads.kernels, "_ops", None)
    assert memory_reads.kernels() is None
    memory, key = rand(2, 6, 4, seed=1).requires_grad_(True), rand(2, 4, seed=2)
    mask = prefix_mask([6, 2], 6)
    att, glimpse = MemoryReads(memory).attend(key, mask)
    assert type(att.grad_fn).__name__ != FUSED
    expected = masked_softmax(torch.bmm(memory, key.unsqueeze(-1)).squeeze(-1), mask)
    torch.testing.assert_close(att, expected, atol=1e-14, rtol=0)
    with pytest.raises(MemreadError, match="backend = 'compiled' needs the attention read kernels"):
        MemoryReads(memory, "compiled").attend(key, mask)  # insists: an error, not the composition
    monkeypatch.undo()
    att16, glimpse16 = MemoryReads(memory.detach().bfloat16()).attend(key.bfloat16(), mask)  # not a kernel dtype
    assert att16.dtype == glimpse16.dtype == torch.bfloat16


def test_the_backend_is_one_option_checked_where_it_is_set():
    """``backend`` is the head config's option, passed to the module and settable on it; a name it does not
    offer is an error where it is set; ``"compiled"`` where the kernel cannot run (a GPU, a bfloat16
    memory) is an error, not a silent fall-back."""
    m = IterativeAlternatingAttention(IAAHeadConfig(steps=2, inference=3, backend="function"), enc_size=4)
    assert m.backend == "function"
    m.backend = "auto"
    with pytest.raises(MemreadError, match="head iaa: backend must be one of"):
        m.backend = "autograd"
    with pytest.raises(MemreadError, match="backend must be one of"):
        MemoryReads(rand(2, 3, 4, seed=1), "tensor")
    memory, key = rand(2, 6, 4, seed=1).bfloat16(), rand(2, 4, seed=2).bfloat16()
    with pytest.raises(MemreadError, match="backend = 'compiled' runs on CPU tensors in float32 or float64"):
        MemoryReads(memory, "compiled").attend(key)
    att, _ = MemoryReads(memory, "function").attend(key)
    assert type(att.grad_fn).__name__ != FUSED
