"""Checked claims: every sentence of the book that states a result is backed by one (Intro, "How to read").

There are two main kinds, each with its own job (and two more beside them, below):

* :func:`check`, a **must-hold check**: an identity, a step of a proof, a control or baseline, the agreement
  of a live recomputation with a precomputed file, or a gate saying that a model is trained enough for an
  analysis to mean anything. A check that does not hold raises :class:`ClaimFailed`, so nbval fails.
* :func:`compare`, a **comparison with a paper**: this book's value, the paper's value, an agreement rule
  stated before the result (an absolute or relative tolerance, a side of a threshold, a level reached, an
  interval of the book's within an equivalence margin or containing the paper's value, or a test against
  chance) and the verdict, computed: *reproduces*, *differs*, or *undecided* when the book's interval
  straddles the rule's threshold, its test does not reach p < 0.05, or these data cannot decide. A comparison that
  differs carries its reason, computed from measured values when the claim is made, or
  :data:`NOT_MEASURED`. It never raises because of its verdict (a ``paper`` run on a GPU may decide otherwise
  than CI's ``quick`` run, and must still finish); nothing ever passes *because* a result differs: a flipped
  verdict changes the compared output, so nbval fails at the preset of the committed outputs, and
  ``tests/test_book.py`` requires that every committed *differs* has a measured reason.

Two more kinds sit beside them: a :func:`gate` (the evidence an analysis needs, recorded pass or fail) and a
:func:`finding` (a difference between two arms of the book's own experiment, decided by a stated test).

Each displayed claim carries a JSON record under the mimetype :data:`MIMETYPE`, so the reproduction page
lists every claim of the book from the executed notebooks, with nothing typed in by hand.

What nbval compares is what does not depend on the CPU: a claim's kind, name, condition or rule, paper value
and verdict must match the committed output exactly, and its value must lie within the claim's ``band`` of
the committed value (:func:`records_agree`, applied by ``book/conftest.py``). The default band is
:data:`DEFAULT_REL_BAND` of the committed value; claims whose value moves more between CPUs (a trained
model's accuracy) state a wider one, and counts are compared exactly. A value at round-off level is never a
claim's value: state it as a count of instances above a threshold instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Sequence

from attnbook.claims.render import fmt_number as _fmt
from attnbook.claims.render import html_table

MIMETYPE = "application/vnd.attnbook.claim+json"

#: the default band, relative to the committed value, within which a re-executed claim's value agrees
DEFAULT_REL_BAND = 0.02

#: the two kinds of claim, as they appear in records
CHECK, COMPARISON = "check", "comparison"
#: a comparison whose book value is measured on another model or in another experiment than the paper's (a
#: pretrained MiniLM where the paper measured BERT, say, or encoder-only pruning against a gap the paper measured
#: pruning all kinds): its verdict is computed as a comparison's, but it is an analogue, not a reproduction
ANALOGUE = "analogue"
#: the evidence an analysis needs, recorded whether it passes or fails (:func:`gate`)
GATE = "gate"

#: a difference between two arms of the book's own experiment, decided by a stated test (:func:`finding`)
FINDING = "finding"

#: the verdicts of a comparison (:func:`compare`)
REPRODUCES, DIFFERS, UNDECIDED = "reproduces", "differs", "undecided"
#: the verdicts of a finding (:func:`finding`; *undecided* as a comparison's)
HIGHER, LOWER, NOT_SHOWN = "higher", "lower", "not shown"

#: the reason a comparison that differs gets when the caller measured none
NOT_MEASURED = "reason not measured"

#: the claims checked so far in this process, in order
REGISTRY: list["Claim"] = []


class ClaimFailed(AssertionError):
    """A must-hold check does not hold in this run."""


def _round(x: Optional[float], digits: int) -> Optional[float]:
    if x is None:
        return None
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - int(math.floor(math.log10(abs(x)))))



@dataclass(frozen=True)
class Claim:
    """One claim as displayed and recorded. ``value``, ``paper`` and ``interval`` are rounded to ``digits``
    significant digits; ``band`` is absolute (the committed value is held within ``value +- band``)."""

    name: str
    value: float
    condition: str
    kind: str = CHECK
    verdict: str = "holds"
    paper: Optional[float] = None
    paper_note: str = ""
    reason: str = ""
    interval: Optional[tuple] = None
    band: float = 0.0
    precomputed: str = ""
    chapter: str = ""
    holds: bool = True
    digits: int = 3

    @property
    def in_words(self) -> str:
        """The verdict as a sentence's verb ("reproduces", "does not reproduce", "is undecided"; a check's or a
        gate's "holds", "fails", "passes"), for prose that cites it through :func:`attnbook.claims.prose.glue`."""
        return {DIFFERS: "does not reproduce", UNDECIDED: "is undecided",
                NOT_AVAILABLE: "is not available"}.get(self.verdict, self.verdict)

    def line(self) -> str:
        """The claim in one line of text (what a notebook shows as plain text)."""
        value = _fmt(self.value)
        if self.interval is not None:
            value += f" (interval {_fmt(self.interval[0])} to {_fmt(self.interval[1])})"
        paper = f"; paper {_fmt(self.paper)}" if self.paper is not None else ""
        note = f" ({self.paper_note})" if self.paper_note else ""
        reason = ""
        if self.verdict == DIFFERS and self.reason:
            reason = f"; differs: {NOT_MEASURED}" if self.reason == NOT_MEASURED else f"; differs because {self.reason}"
        elif self.kind == GATE and self.verdict == "fails":
            reason = f"; {self.reason}"
        elif self.kind == FINDING and self.verdict == UNDECIDED:
            reason = f"; undecided: {self.reason}"
        elif self.verdict == UNDECIDED:
            why = ("these data cannot decide (the rule says why)" if "cannot decide" in self.condition
                   else "the interval straddles the rule's threshold" if self.interval is not None
                   else "the test against chance does not reach p < 0.05")
            reason = f"; undecided: {why}" + (f" ({self.reason})" if self.reason else "")
        pre = f"; precomputed by `{self.precomputed}`" if self.precomputed else ""
        return f"{self.kind} {self.verdict}: {self.name}: book {value} [{self.condition}]{paper}{note}{reason}{pre}"

    def __repr__(self) -> str:
        return self.line()

    def record(self) -> dict:
        """The JSON record that the reproduction page reads."""
        rec = asdict(self)
        rec["interval"] = list(self.interval) if self.interval is not None else None
        return rec

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.line(), "text/html": html_table([self]), MIMETYPE: self.record()}


def _number(name: str, what: str, x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise ValueError(f"claim {name!r}: {what} must be a number, got {x!r}") from None


def _band(name: str, value: float, band: Optional[float], digits: int) -> float:
    if band is None:
        return _round(DEFAULT_REL_BAND * abs(value), 2) if math.isfinite(value) else 0.0
    band = _number(name, "band", band)
    if not band >= 0:
        raise ValueError(f"claim {name!r}: band must be a non-negative number, got {band}")
    return band


def check(
    name: str,
    value: float,
    *,
    close_to: Optional[float] = None,
    tol: Optional[float] = None,
    at_least: Optional[float] = None,
    at_most: Optional[float] = None,
    predicate: Optional[Callable[[float], bool]] = None,
    description: Optional[str] = None,
    band: Optional[float] = None,
    precomputed: str = "",
    chapter: str = "",
    digits: int = 3,
) -> Claim:
    """A must-hold check: ``value`` satisfies the stated condition, or :class:`ClaimFailed` is raised.

    Conditions (at least one, all must hold): ``close_to`` with ``tol`` (absolute), ``at_least``,
    ``at_most``, or ``predicate`` with a ``description`` saying what it tests. ``band``: how far a
    re-execution's value may move from the committed one (absolute; default :data:`DEFAULT_REL_BAND` of the
    value). ``precomputed``: the command that made the shipped file the value is read from ("" when the
    value is computed in the reader's run). A comparison with a paper is :func:`compare`, not a check.

    Raises ``ValueError`` when the claim itself is malformed (no condition, a target without a tolerance,
    a predicate without a description, a value that is not a number).
    """
    fields, holds = _evaluated(name, value, close_to, tol, at_least, at_most, predicate, description, band, digits)
    claim = Claim(**fields, kind=CHECK, verdict="holds" if holds else "fails", precomputed=precomputed,
                  chapter=chapter, holds=holds)
    if not claim.holds:
        raise ClaimFailed(f"{claim.line()}\n  unrounded book value: {value!r}; condition: {claim.condition}")
    REGISTRY.append(claim)
    return claim


def _validate(name, value, close_to, tol, at_least, at_most, predicate, description) -> float:
    if not name:
        raise ValueError("a claim needs a name")
    value = _number(name, "value", value)
    if close_to is not None and tol is None:
        raise ValueError(f"claim {name!r}: close_to={close_to} needs a tolerance tol")
    if tol is not None and (close_to is None or tol < 0):
        raise ValueError(f"claim {name!r}: tol must be non-negative and go with close_to")
    if predicate is not None and not description:
        raise ValueError(f"claim {name!r}: a predicate needs a description of what it tests")
    if close_to is None and at_least is None and at_most is None and predicate is None:
        raise ValueError(
            f"claim {name!r}: give a condition (close_to+tol, at_least, at_most or predicate)"
        )
    return value


def _evaluated(name, value, close_to, tol, at_least, at_most, predicate, description, band,
               digits) -> tuple[dict, bool]:
    """A check's or a gate's displayed fields (name, rounded value, stated conditions, band, digits) and
    whether the value meets every condition; malformed conditions raise ``ValueError``."""
    value = _validate(name, value, close_to, tol, at_least, at_most, predicate, description)
    parts, holds = _conditions(value, close_to, tol, at_least, at_most, predicate, description)
    return dict(name=name, value=_round(value, digits), condition=", ".join(parts),
                band=_band(name, value, band, digits), digits=digits), holds


def _conditions(value, close_to, tol, at_least, at_most, predicate, description) -> tuple[list, bool]:
    """The stated conditions of a check or a gate, and whether ``value`` meets them all."""
    parts, holds = [], math.isfinite(value)
    if close_to is not None:
        parts.append(f"within {tol:g} of {close_to:g}")
        holds &= abs(value - close_to) <= tol
    if at_least is not None:
        parts.append(f">= {at_least:g}")
        holds &= value >= at_least
    if at_most is not None:
        parts.append(f"<= {at_most:g}")
        holds &= value <= at_most
    if predicate is not None:
        parts.append(description)
        holds &= bool(predicate(value))
    return parts, bool(holds)


def gate(
    name: str,
    value: float,
    *,
    guards: str,
    close_to: Optional[float] = None,
    tol: Optional[float] = None,
    at_least: Optional[float] = None,
    at_most: Optional[float] = None,
    band: Optional[float] = None,
    precomputed: str = "",
    chapter: str = "",
    digits: int = 3,
) -> Claim:
    """A gate: the evidence an analysis needs (a model trained enough), with conditions as in :func:`check`.
    Unlike a check, a gate that fails is recorded (verdict *fails*), not raised: the evidence is what it is, and
    the chapter must then say what the failure means for the analyses the gate guards (``guards``, which the
    claim shows) and carry it into their reasons (``claim.holds``). The reproduction page counts gates apart."""
    if not guards:
        raise ValueError(f"gate {name!r}: say which analyses the gate guards (guards=...)")
    fields, holds = _evaluated(name, value, close_to, tol, at_least, at_most, None, None, band, digits)
    claim = Claim(**fields, kind=GATE, verdict="passes" if holds else "fails",
                  reason="" if holds else f"failed: {guards}", precomputed=precomputed, chapter=chapter,
                  holds=holds)
    REGISTRY.append(claim)
    return claim


def compare(
    name: str,
    value: float,
    *,
    paper: float,
    source: str,
    tol: Optional[float] = None,
    rel_tol: Optional[float] = None,
    same_side_of: Optional[float] = None,
    interval: Optional[Sequence[float]] = None,
    reaches: Optional[float] = None,
    lower_is_better: bool = False,
    above_chance: Optional[Sequence[float]] = None,
    chance_name: str = "chance",
    test_in_rule: bool = True,
    reason: str | Callable[[float], str] = "",
    band: Optional[float] = None,
    precomputed: str = "",
    chapter: str = "",
    digits: int = 3,
    analogue: str = "",
    power: Optional[float] = None,
    smallest_p: Optional[float] = None,
    cannot_decide: str = "",
) -> Claim:
    """A comparison of this book's ``value`` with the ``paper``'s, under an agreement rule stated beforehand.

    ``source``: where the paper's value is read (section, table or figure). Exactly one rule:

    * ``tol``: reproduces when ``|value - paper| <= tol``;
    * ``rel_tol``: reproduces when ``|value - paper| <= rel_tol * |paper|``;
    * ``same_side_of``: reproduces when ``value`` and ``paper`` lie on the same side of this threshold
      (strictly above it, or not): a direction, "an effect exists", "more than chance";
    * ``interval``: this book's confidence interval ``(lo, hi)`` for the quantity; reproduces when it
      contains ``paper`` (``value`` is the point estimate);
    * ``reaches``: a level the paper reports reaching (an accuracy, a share), one-sided: reproduces when
      ``value >= paper - reaches`` (``lower_is_better=True``: ``value <= paper + reaches``, for an error or a
      loss), so that doing better than the paper never counts as differing; with ``interval``, reproduces when
      the whole interval reaches the level, differs when none of it does, and is *undecided* otherwise;
    * ``above_chance``: ``(chance, p, p_below)``, for a qualitative statement of the paper ("the most confident
      heads are the most relevant"), coded ``paper=1`` (the effect exists): ``value`` is the book's statistic,
      ``chance`` its value under no effect, ``p`` the one-sided p-value of a stated test against chance (name
      the test in the claim) and ``p_below`` that of the same test turned the other way (the statistic lies
      below chance); reproduces when ``value`` is above chance with ``p < 0.05``, differs only when
      ``p_below < 0.05``, and is *undecided* otherwise: a value not above chance beyond its noise is no
      evidence that the effect is absent (chapter "Path effectiveness": a path accuracy a hair under the
      majority line) (``chance_name`` names the
      floor in the rule's text where it is not chance: "the majority line", "the probe at length 0";
      ``test_in_rule=False`` leaves the test's numbers (``chance`` and ``p``) out of the rule's text, for a test
      on a model trained in the reader's run, whose digits differ between CPUs while the verdict does not:
      print them beside the claim; ``smallest_p``: the smallest p-value the test can give at this size, a
      rank among ``h`` heads say ``1 / h``: where it is not below 0.05 the test cannot decide, and the verdict is
      *undecided* whatever the value, the rule's text saying so);
    * ``interval`` with ``tol``: an equivalence margin, for a "no change" or "falls to chance" the paper
      reports: reproduces when the whole interval lies within ``tol`` of ``paper``, differs when none of it
      does, and is *undecided* when it reaches across the margin (a 90% interval makes it the two one-sided
      tests at 5% each);
    * ``interval`` with ``same_side_of``: reproduces when the whole interval lies on the paper's side of the
      threshold, differs when it lies wholly on the other side, and is *undecided* when it straddles the
      threshold: a direction counts only when the seeds decide it (for example a delay, or a gain, that the
      paper reports as positive; :func:`attnbook.stats.welch_t` makes intervals).

    The verdict is computed, never raised: ``"reproduces"``, ``"differs"`` or ``"undecided"``. ``reason``
    explains a *differs* (and says what was measured for an *undecided*): compute it from measured values when
    the claim is made, so that it is true at every preset (a callable ``reason(value)`` is called only when the
    verdict is not *reproduces*); a *differs* without one says :data:`NOT_MEASURED`. ``band``, ``precomputed``: as in :func:`check`.

    ``power``: with an ``interval`` rule, the share of simulated runs in which the rule reproduces when the
    paper's effect is true, computed from this book's own noise (e.g. :func:`attnbook.stats.pooled_rule_power`);
    the rule's text states it, so that a reader sees how often a faithful reproduction would say so.

    ``cannot_decide``: why these data cannot decide, whatever the value (every run of the arm that should
    come first censored, say, so that no delay could show): the verdict is then *undecided* and the rule's
    text says why; empty where the rule can decide.

    ``analogue``: the model the book measured where the paper measured another (``"pretrained MiniLM"``). The
    claim is then of kind :data:`ANALOGUE`, its note says so, and the reproduction page counts it apart from the
    reproductions: a result on another model, or from another experiment, can agree with the paper's, but it
    does not reproduce it.
    """
    if not name:
        raise ValueError("a claim needs a name")
    if not source:
        raise ValueError(f"claim {name!r}: say where the paper's value is read (source=...)")
    value = _number(name, "value", value)
    paper = _number(name, "paper", paper)
    if not math.isfinite(value) or not math.isfinite(paper):
        raise ValueError(f"claim {name!r}: value and paper must be finite, got {value!r} and {paper!r}")
    rules = [r for r in (tol, rel_tol, same_side_of, interval, reaches, above_chance) if r is not None]
    decisive = (same_side_of is not None or reaches is not None or tol is not None) and interval is not None \
        and len(rules) == 2
    if (len(rules) != 1 and not decisive) or (same_side_of is not None and reaches is not None):
        raise ValueError(
            f"claim {name!r}: give exactly one agreement rule (tol, rel_tol, same_side_of, reaches, above_chance or "
            "interval; "
            f"or same_side_of, reaches or tol with interval), got {len(rules)}"
        )
    if lower_is_better and reaches is None:
        raise ValueError(f"claim {name!r}: lower_is_better goes with reaches")
    rounded_interval = None
    if tol is not None:
        tol = _number(name, "tol", tol)
        if tol < 0:
            raise ValueError(f"claim {name!r}: tol must be non-negative")
        if interval is None:  # with an interval, tol is an equivalence margin (below)
            rule, agrees = f"within {tol:g} of the paper's value", abs(value - paper) <= tol
    elif rel_tol is not None:
        rel_tol = _number(name, "rel_tol", rel_tol)
        if rel_tol < 0:
            raise ValueError(f"claim {name!r}: rel_tol must be non-negative")
        rule = f"within {100 * rel_tol:g}% of the paper's value"
        agrees = abs(value - paper) <= rel_tol * abs(paper)
    if interval is not None:
        if len(interval) != 2:
            raise ValueError(f"claim {name!r}: interval must be (lo, hi), got {interval!r}")
        lo, hi = (_number(name, "interval", x) for x in interval)
        if not lo <= value <= hi:
            raise ValueError(f"claim {name!r}: the interval ({lo}, {hi}) must contain the value {value}")
        rounded_interval = (_round(lo, digits), _round(hi, digits))
    undecided = False
    if tol is not None and interval is not None:  # equivalence: the whole interval within the margin
        rule = f"this book's whole interval within {tol:g} of the paper's value (an equivalence margin)"
        agrees = paper - tol <= lo and hi <= paper + tol
        undecided = not agrees and lo <= paper + tol and hi >= paper - tol
    if above_chance is not None:
        if len(above_chance) != 3 or paper != 1:
            raise ValueError(f"claim {name!r}: above_chance is (chance, p, p_below) and goes with paper=1 (the "
                             f"effect exists), got {above_chance!r} and paper={paper!r}")
        chance, p, p_below = (_number(name, "above_chance", x) for x in above_chance)
        if not all(0 <= q <= 1 for q in (p, p_below)):
            raise ValueError(f"claim {name!r}: p must be in [0, 1], got {(p, p_below)}")
        if not chance_name:
            raise ValueError(f"claim {name!r}: chance_name names the floor, got {chance_name!r}")
        shown = f"{p:.3g}" if 0.045 <= p < 0.055 else f"{p:.2g}"  # never "0.05" for a p below it
        rule = (f"above {chance_name} ({_fmt(_round(chance, digits))}) with one-sided p < 0.05 (here p = {shown})"
                if test_in_rule else f"above {chance_name} with one-sided p < 0.05 (both printed with the test)")
        # "differs" needs the test's evidence that the statistic lies below chance
        if value > chance and p_below < 0.05:
            raise ValueError(f"claim {name!r}: a value above {chance_name} with p_below = {p_below} < 0.05: "
                             "the two one-sided p-values do not come from one test")
        rule += f"; differs only when below {chance_name} with one-sided p < 0.05, else undecided"
        agrees = value > chance and p < 0.05
        undecided = not agrees and p_below >= 0.05
        if smallest_p is not None:
            smallest_p = _number(name, "smallest_p", smallest_p)
            if not 0 < smallest_p <= p:
                raise ValueError(f"claim {name!r}: smallest_p is the test's smallest possible p, in (0, p], got "
                                 f"{smallest_p!r} with p = {p}")
            if smallest_p >= 0.05:
                rule += f"; the test's smallest possible p here is {smallest_p:.3g}, so it cannot decide"
                agrees, undecided = False, True
    elif reaches is not None:
        margin = _number(name, "reaches", reaches)
        if margin < 0:
            raise ValueError(f"claim {name!r}: reaches must be a non-negative margin")
        level = paper + margin if lower_is_better else paper - margin
        side = "at most" if lower_is_better else "at least"
        ok = (lambda x: x <= level) if lower_is_better else (lambda x: x >= level)
        if interval is not None:
            rule = f"this book's whole interval {side} the paper's level {level:g} (the paper's value " \
                   f"{'+' if lower_is_better else '-'} {margin:g})"
            agrees, undecided = ok(lo) and ok(hi), ok(lo) != ok(hi)
        else:
            rule = f"{side} the paper's level {level:g} (the paper's value {'+' if lower_is_better else '-'} " \
                   f"{margin:g}): reaching it is what the paper reports"
            agrees = ok(value)
    elif decisive and same_side_of is not None:
        t = _number(name, "same_side_of", same_side_of)
        rule = f"this book's whole interval on the same side of {t:g} as the paper's value"
        agrees = (lo > t) == (paper > t) and (hi > t) == (paper > t)
        undecided = (lo > t) != (hi > t)
    elif same_side_of is not None:
        t = _number(name, "same_side_of", same_side_of)
        rule = f"on the same side of {t:g} as the paper's value"
        agrees = (value > t) == (paper > t)
    elif interval is not None and tol is None:
        rule = "this book's interval contains the paper's value"
        agrees = lo <= paper <= hi
    if smallest_p is not None and above_chance is None:
        raise ValueError(f"claim {name!r}: smallest_p goes with the above_chance rule")
    if cannot_decide:
        rule += f"; {cannot_decide}, so it cannot decide"
        agrees, undecided = False, True
    if power is not None:
        power = _number(name, "power", power)
        if interval is None or not 0 <= power <= 1:
            raise ValueError(f"claim {name!r}: power is a share in [0, 1] and goes with an interval rule, got "
                             f"{power!r}" + ("" if interval is not None else " without an interval"))
        rule += f"; the rule's power: {power:.2f} (how often it reproduces when the paper's effect is true, " \
                "computed from this book's noise)"
    verdict = REPRODUCES if agrees else UNDECIDED if undecided else DIFFERS
    if verdict == REPRODUCES:
        reason = ""
    else:  # what was measured: why it differs, or what leaves it undecided (the spread of the seeds, say)
        reason = (reason(value) if callable(reason) else reason) or (NOT_MEASURED if verdict == DIFFERS else "")
    claim = Claim(
        name=name,
        value=_round(value, digits),
        condition=rule,
        kind=ANALOGUE if analogue else COMPARISON,
        verdict=verdict,
        paper=_round(paper, digits),
        paper_note=f"analogue on {analogue}, not the paper's model or experiment; {source}" if analogue else source,
        reason=reason,
        interval=rounded_interval,
        band=_band(name, value, band, digits),
        precomputed=precomputed,
        chapter=chapter,
        holds=True,
        digits=digits,
    )
    REGISTRY.append(claim)
    return claim


def finding(
    name: str,
    value: float,
    *,
    interval: Optional[Sequence[float]],
    test: str,
    level: float = 0.95,
    band: Optional[float] = None,
    precomputed: str = "",
    chapter: str = "",
    digits: int = 3,
) -> Claim:
    """A finding of the book's own experiment: ``value``, the difference of a statistic between two of its arms
    (one arm minus the other), with its ``level`` confidence ``interval`` from a ``test`` stated before the
    result (say which, over what it resamples or averages, seeds or test verses, with its degrees of freedom).
    No paper printed the number, so there is no paper value; the rule is the test's: *higher* when the whole
    interval lies above 0, *lower* when it lies below, *not shown* when it contains 0 (a difference the noise
    cannot tell from none: not evidence of no difference), and *undecided* when ``interval`` is None (the test
    gives none: one seed per arm, say). A percentile bootstrap interval need not contain ``value``; it must
    only be ordered, ``lo <= hi``.
    Like a comparison's, the verdict is computed, never raised, and nbval compares it exactly; the reproduction
    page counts findings apart from comparisons with a paper. ``band``, ``precomputed``: as in :func:`check`."""
    if not name:
        raise ValueError("a claim needs a name")
    if not test:
        raise ValueError(f"finding {name!r}: say which test makes the interval (test=...)")
    value = _number(name, "value", value)
    if not math.isfinite(value):
        raise ValueError(f"finding {name!r}: the value must be finite, got {value!r}")
    level = _number(name, "level", level)
    if not 0 < level < 1:
        raise ValueError(f"finding {name!r}: level is a confidence level in (0, 1), got {level}")
    rule = (f"{test}: {100 * level:g}% interval of the difference above 0 (higher), below 0 (lower), or "
            "containing 0 (not shown)")
    rounded = None
    if interval is None:
        verdict, reason = UNDECIDED, "the test gives no interval (one seed per arm)"
    else:
        if len(interval) != 2:
            raise ValueError(f"finding {name!r}: interval must be (lo, hi) or None, got {interval!r}")
        lo, hi = (_number(name, "interval", x) for x in interval)
        if not lo <= hi:
            raise ValueError(f"finding {name!r}: the interval must be (lo, hi) with lo <= hi, got ({lo}, {hi})")
        verdict = HIGHER if lo > 0 else LOWER if hi < 0 else NOT_SHOWN
        reason, rounded = "", (_round(lo, digits), _round(hi, digits))
    claim = Claim(name=name, value=_round(value, digits), condition=rule, kind=FINDING, verdict=verdict,
                  reason=reason, interval=rounded, band=_band(name, value, band, digits), precomputed=precomputed,
                  chapter=chapter, holds=True, digits=digits)
    REGISTRY.append(claim)
    return claim


#: the verdict of a claim whose precomputed file does not exist at the active preset
NOT_AVAILABLE = "not available"


def not_available(name: str, missing) -> Claim:
    """A claim that this run cannot make: the file it reads (a :class:`attnbook.core.runs.Missing`, what
    :func:`attnbook.core.runs.find` returns) does not exist at the active preset. Recorded with the verdict
    *not available* and the command that makes the file; never a pass of the claim it stands for."""
    if missing:
        raise ValueError(f"claim {name!r}: not_available needs a missing file (attnbook.core.runs.find's Missing), "
                         f"got {type(missing).__name__}")
    condition = f"needs the file of run {missing.name} at preset {missing.preset}"
    if not missing.command:  # the run is not defined at that preset: say so
        condition += f" ({missing.why})"
    claim = Claim(name=name, value=None, condition=condition, verdict=NOT_AVAILABLE, precomputed=missing.command)
    REGISTRY.append(claim)
    return claim


def when_available(shipped, claims: Callable[[], Sequence[Claim]], name: str) -> list:
    """``claims()`` when ``shipped`` (a file :func:`attnbook.core.runs.find` returned) exists; else one
    :func:`not_available` claim called ``name`` that names the command making the file. A chapter's section
    that reads a precomputed file states its claims through this, so that it runs at every preset."""
    return list(claims()) if shipped else [not_available(name, shipped)]


def guarded(gates: Sequence[Claim], claims: Callable[[], Sequence[Claim]]) -> list:
    """The gates, then ``claims()`` only if every gate passes: the analysis a gate guards is not made when the
    gate fails (the book's rule, "What a result is here"), and ``claims`` is not even called then, so nothing
    it would compute or record reaches the page. Each of ``gates`` must be a recorded gate (:func:`gate`)."""
    gates = list(gates)
    if not gates or any(not isinstance(g, Claim) or g.kind != GATE for g in gates):
        raise ValueError("guarded needs one or more gates made by attnbook.claims.gate, got "
                         f"{[getattr(g, 'kind', type(g).__name__) for g in gates]}")
    return gates + (list(claims()) if all(g.holds for g in gates) else [])
