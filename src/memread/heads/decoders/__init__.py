"""Decoders: a second reader that reads a target sequence conditioned on what an encoder (any registered
reader) wrote, one file each. Heads build them; they are not in the ``READERS`` registry.

- :mod:`memread.heads.decoders.attention`: an LSTM with additive attention over the encoder's states
  (RNNSearch-like), the ``attention_decoder`` translation head's decoder.
- :mod:`memread.heads.decoders.nse`: an NSE that reads and writes the encoder NSE's final memory, no memory
  of its own (NSE-NSE), the ``nse_decoder`` translation head's decoder.
- :mod:`memread.heads.decoders.lstmn_fusion`: an LSTMN with shallow or deep attention fusion over an LSTMN
  encoder's tapes (Cheng et al. 2016, section 4), the ``lstmn_shallow`` and ``lstmn_deep`` translation heads'
  decoder and the ``pair`` head's ``shallow_fusion`` / ``deep_fusion`` encoders.

The translation decoders follow the decoder protocol of :mod:`memread.decoding` (``start``, ``forward``,
``step``, ``reorder``).
"""
