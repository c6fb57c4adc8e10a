"""Tooling of the book itself, not of any chapter: the reproduction page (:mod:`.reproduction`) and the page of
rules changed after their data (:mod:`.rule_changes`). It needs ``nbformat`` and ``pyyaml`` (the ``book``
extra of the package), which a chapter does not."""
