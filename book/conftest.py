"""nbval over the chapters: a claim's value agrees with the committed one within the claim's band.

nbval compares a re-executed cell's outputs with the committed ones as strings. A claim's output (text,
HTML and its JSON record under ``attnbook.claims.MIMETYPE``) holds its value, which moves in its last
digits between CPUs (AVX-512, AVX2, no SIMD) and thread counts. Before nbval compares, each live claim
output whose records agree with the committed ones (:func:`attnbook.claims.records_agree`: the same kind,
name, condition, paper value and verdict, the value within the committed claim's band) is replaced by the
committed output; any other difference, a claim outside its band included, is left for nbval to report.

It also runs chapters on the virtual CUDA device (:mod:`attnbook.core.virtual_cuda`, README "Devices"): with
``ATTNBOOK_VIRTUAL_CUDA_CHAPTERS=odd`` (or ``even``) the chapters of that number's parity start their kernel with
``ATTNBOOK_VIRTUAL_CUDA=1``, so that ``attnbook.setup`` returns the virtual ``cuda`` device and every tensor the
chapter puts there obeys CUDA's device rules; the numbers are the CPU's, so nbval's comparison is unchanged.
``make nbval`` gives its two runs the two parities: every chapter runs once on the virtual device.
"""

from __future__ import annotations

import os
import re

from attnbook.claims import accept_claims_within_band
from attnbook.core import virtual_cuda

#: "odd" or "even": the chapters of that number's parity run on the virtual CUDA device (module docstring)
SPLIT_ENV = "ATTNBOOK_VIRTUAL_CUDA_CHAPTERS"


def on_virtual_cuda(notebook: str, split: str | None) -> bool:
    """Whether chapter ``notebook`` (a file name such as ``06_circle_task.ipynb``) runs on the virtual CUDA
    device under ``split`` (``"odd"``, ``"even"``, or None/"" for none); pages without a number never do."""
    if not split:
        return False
    if split not in ("odd", "even"):
        raise ValueError(f"{SPLIT_ENV} must be 'odd' or 'even', got {split!r}")
    m = re.match(r"(\d+)_", notebook)
    return bool(m) and (int(m.group(1)) % 2 == 1) == (split == "odd")


def pytest_configure(config):
    try:
        from nbval.plugin import IPyNbCell, IPyNbFile
    except ImportError:  # pragma: no cover - nbval is in requirements.txt
        return
    if getattr(IPyNbCell, "_attnbook_bands", False):
        return
    start_kernel = IPyNbFile.setup

    def setup(self):  # the kernel inherits the environment when it starts
        virtual = on_virtual_cuda(self.path.name, os.environ.get(SPLIT_ENV))
        os.environ[virtual_cuda.ENV_VAR] = "1" if virtual else "0"
        start_kernel(self)

    IPyNbFile.setup = setup
    original = IPyNbCell.compare_outputs

    def compare_outputs(self, test, ref, skip_compare=None):
        return original(self, accept_claims_within_band(test, ref), ref, skip_compare)

    IPyNbCell.compare_outputs = compare_outputs
    IPyNbCell._attnbook_bands = True
