"""memread: memory-augmented neural readers in PyTorch.

The package is laid out like the architecture it implements:

- ``modules``  shared building blocks: masking, attention scoring, embeddings
- ``readers``  one file per reader (LSTM/RNN baselines, and the memory readers)
- ``tasks``    task heads and the models they build around a reader
- ``data``     vocabularies, corpus readers, batching, the built-in story generator
- ``training`` the one training loop, checkpoints, optimisers and schedules
- ``tools``    on top of the library: inspection and evaluation of trained runs, the quickstart
- ``bench``    training throughput of readers against their named baselines
- ``cli``      the ``memread`` command
"""

__version__ = "0.1.0"

from memread.errors import MemreadError

__all__ = ["MemreadError", "__version__"]
