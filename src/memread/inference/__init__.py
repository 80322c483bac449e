"""Applying trained readers to new text: model archives (``archive``) and the predictor behind
``memread.load`` and ``memread predict`` (``predictor``)."""
