"""Tooling of the book itself, not of any chapter: the reproduction page (:mod:`.reproduction`). It needs
``nbformat`` and ``pyyaml`` (the ``book`` extra of the package), which a chapter does not."""
