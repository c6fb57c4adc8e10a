"""attnbook: the thin shared library behind the book "What attention alone cannot do".

Each module holds one concept and names, in its docstrings, the chapter and equation it implements.
"""

from attnbook.claims import check, compare, finding, gate
from attnbook.core.presets import device, preset, seed_everything, setup
import attnbook.core.runs  # noqa: F401  (every chapter reads the shipped files through attnbook.core.runs)

__all__ = ["check", "compare", "finding", "gate", "device", "preset", "seed_everything", "setup"]
__version__ = "0.1.0"
