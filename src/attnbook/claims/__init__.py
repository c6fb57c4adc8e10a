"""Checked claims (Intro, "How to read"): the claim API (:mod:`.api`), how a claim is shown (:mod:`.render`), how
nbval compares it within its band (:mod:`.bands`), the IPython formatter for lists of claims (:mod:`.notebook`)
and the papers' printed numbers (:mod:`.papers`)."""

from attnbook.claims import notebook as _notebook  # noqa: F401  (registers the list formatter in a kernel)
from attnbook.claims.api import (
    ANALOGUE,
    CHECK,
    COMPARISON,
    DEFAULT_REL_BAND,
    MIMETYPE,
    NOT_AVAILABLE,
    NOT_MEASURED,
    REGISTRY,
    DIFFERS,
    FINDING,
    GATE,
    HIGHER,
    LOWER,
    NOT_SHOWN,
    REPRODUCES,
    UNDECIDED,
    Claim,
    ClaimFailed,
    check,
    compare,
    finding,
    gate,
    guarded,
    not_available,
    when_available,
)
from attnbook.claims.bands import accept_claims_within_band, records_agree
from attnbook.claims.render import html_table

__all__ = ["ANALOGUE", "CHECK", "COMPARISON", "DEFAULT_REL_BAND", "MIMETYPE", "REGISTRY", "Claim", "ClaimFailed", "check",
           "compare", "finding", "gate", "guarded", "GATE", "FINDING", "HIGHER", "LOWER", "NOT_SHOWN", "not_available", "when_available", "NOT_AVAILABLE",
           "NOT_MEASURED", "REPRODUCES", "DIFFERS", "UNDECIDED",
           "accept_claims_within_band", "records_agree", "html_table"]
