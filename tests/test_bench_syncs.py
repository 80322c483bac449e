"""memread.bench.syncs: the host synchronisations of a training step, found on the CPU (what a CUDA graph of a time
loop cannot hold)."""

from __future__ import annotations

import pytest
import torch

from memread.bench.syncs import host_syncs, reader_syncs


def test_each_read_back_is_found_and_counted_and_a_step_without_any_finds_none():
    x = torch.randn(5, requires_grad=True)

    def reads_back():
        y = (x * 2).sum()
        y.item()  # .item()
        if bool((x > 0).any()):  # bool(tensor)
            pass
        torch.nonzero(x > 0)  # a shape that depends on the values
        y.backward()

    found = {f["op"]: f["count"] for f in host_syncs(reads_back)}
    assert found == {"_local_scalar_dense": 2, "nonzero": 1}
    assert all(f["where"] == "outside memread" for f in host_syncs(reads_back))

    def stays_on_the_device():
        y = torch.where(x > 0, x, -x).sum()  # a branch as data, not as Python control flow
        y.backward()

    assert host_syncs(stays_on_the_device) == []


def test_the_lines_of_memread_that_read_back_are_named():
    found = reader_syncs("lstm", "padded")
    assert {f["where"].rsplit(":", 1)[0] for f in found} == {"memread/readers/rnn.py"}
    assert all(f["op"] == "_local_scalar_dense" and f["count"] >= 1 for f in found)


@pytest.mark.parametrize("name", ["nse", "gflstm", "dglstm"])
@pytest.mark.parametrize("case", ["stream", "padded"])
def test_the_readers_whose_steps_a_cuda_graph_could_hold_read_nothing_back(name, case):
    """The NSE's Function loop and the deep LSTM baselines' loops make no host synchronisation, full or padded: a
    value read back inside them (an .item(), a branch on a tensor) fails this."""
    assert reader_syncs(name, case) == []
