"""memread: memory-augmented neural readers in PyTorch.

The package is laid out like the architecture it implements:

- ``modules``  shared building blocks: masking, attention scoring, embeddings
- ``readers``  one file per reader (LSTM/RNN baselines, and the memory readers)
- ``tasks``    task heads and the models they build around a reader
- ``data``     vocabularies, corpus readers, batching, the built-in story generator
- ``training`` the one training loop, checkpoints, optimisers and schedules
- ``tools``    on top of the library: inspection and evaluation of trained runs, the quickstart
- ``bench``    training throughput of readers against their named baselines
- ``inference`` trained readers on new text: ``memread.load``, model archives
- ``cli``      the ``memread`` command
"""

from memread.errors import MemreadError
from memread.version import __version__


def load(path, data_root=None, device: str = "cpu", checkpoint: str = "best"):
    """A trained run directory or model archive, ready to ``predict`` on raw text
    (:class:`memread.inference.predictor.Predictor`)."""
    from memread.inference.predictor import load as _load

    return _load(path, data_root, device, checkpoint)


__all__ = ["MemreadError", "__version__", "load"]
