"""nbval over the chapters: a claim's value agrees with the committed one within the claim's band.

nbval compares a re-executed cell's outputs with the committed ones as strings. A claim's output (text,
HTML and its JSON record under ``attnbook.claims.MIMETYPE``) holds its value, which moves in its last
digits between CPUs (AVX-512, AVX2, no SIMD) and thread counts. Before nbval compares, each live claim
output whose records agree with the committed ones (:func:`attnbook.claims.records_agree`: the same kind,
name, condition, paper value and verdict, the value within the committed claim's band) is replaced by the
committed output; any other difference, a claim outside its band included, is left for nbval to report.
"""

from __future__ import annotations

from attnbook.claims import accept_claims_within_band


def pytest_configure(config):
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # pragma: no cover - nbval is in requirements.txt
        return
    if getattr(IPyNbCell, "_attnbook_bands", False):
        return
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        return original(self, accept_claims_within_band(test, ref), ref, skip_compare)

    IPyNbCell.compare_outputs = compare_outputs
    IPyNbCell._attnbook_bands = True
