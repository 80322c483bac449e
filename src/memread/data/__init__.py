"""Data: the data root, vocabularies, corpus readers, batching and the built-in story generator."""
