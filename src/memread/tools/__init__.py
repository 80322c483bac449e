"""What is run on top of the library: inspection and evaluation of trained runs, and the quickstart demo.

Each is one ``memread`` command; none is imported by the library itself (readers, tasks, training).

- ``attend``          ``memread attend``: a reader's intra-attention over a sentence, as a PNG
- ``picture``         ``memread picture``: a cloze run's query and document attention per inference step
- ``attention_span``  ``memread attention-span``: average attention by history position (Daniluk et al. Fig. 3)
- ``curves``          ``memread curves``: validation metric of runs by epoch (table + PNG)
- ``ensemble``        ``memread ensemble``: averaged answer distributions of cloze runs
- ``cbt_lm``          ``memread cbt-lm``: the Children's Book Test answered by a language model
- ``quickstart``      ``memread quickstart``: memoryless baseline vs memory reader on built-in stories
- ``viz``             the PNG helpers they share (matplotlib, Agg backend)
"""
