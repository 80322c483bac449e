"""Shared building blocks: masking (one convention), attention scoring, embeddings."""
