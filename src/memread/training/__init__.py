"""The one training loop, its checkpoints, optimisers and learning-rate schedule."""
