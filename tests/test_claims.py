"""Tests of attnbook.claims (the two kinds of claim, and what nbval compares) and attnbook.stats."""

import pytest
from nbformat.v4 import new_output

from attnbook import claims
from attnbook.claims import (
    ClaimFailed,
    accept_claims_within_band,
    check,
    compare,
    records_agree,
)


def test_check_that_holds_is_recorded_and_rounded():
    c = check("ratio", 0.0123456, at_most=0.05)
    assert c.holds and c.value == 0.0123 and (c.kind, c.verdict) == ("check", "holds")
    assert claims.REGISTRY[-1] is c
    assert c.line() == "check holds: ratio: book 0.0123 [<= 0.05]"
    bundle = c._repr_mimebundle_()
    assert bundle[claims.MIMETYPE]["name"] == "ratio" and bundle["text/plain"] == c.line()
    assert c.band == pytest.approx(0.02 * 0.0123456, rel=0.05)


def test_failed_check_raises_with_everything():
    with pytest.raises(ClaimFailed) as err:
        check("accuracy", 0.5, close_to=0.98, tol=0.05)
    msg = str(err.value)
    assert "check fails: accuracy" in msg and "0.5" in msg and "within 0.05 of 0.98" in msg


def test_conditions_combine():
    assert check("range", 0.5, at_least=0.1, at_most=0.9).condition == ">= 0.1, <= 0.9"
    with pytest.raises(ClaimFailed):
        check("range", 1.5, at_least=0.1, at_most=0.9)
    with pytest.raises(ClaimFailed):
        check("range", 0.05, at_least=0.1, at_most=0.9)
    c = check("even", 4, predicate=lambda v: v % 2 == 0, description="is even")
    assert c.condition == "is even"
    with pytest.raises(ClaimFailed):
        check("even", 3, predicate=lambda v: v % 2 == 0, description="is even")


def test_nan_never_holds():
    with pytest.raises(ClaimFailed):
        check("nan", float("nan"), at_most=1.0)


def test_malformed_checks():
    with pytest.raises(ValueError, match="give a condition"):
        check("x", 1.0)
    with pytest.raises(ValueError, match="needs a tolerance"):
        check("x", 1.0, close_to=1.0)
    with pytest.raises(ValueError, match="description"):
        check("x", 1.0, predicate=lambda v: True)
    with pytest.raises(ValueError, match="must be a number"):
        check("x", "high", at_most=1)
    with pytest.raises(ValueError, match="needs a name"):
        check("", 1.0, at_most=1)
    with pytest.raises(ValueError, match="band"):
        check("x", 1.0, at_most=2, band=-1)
    with pytest.raises(TypeError):  # a paper value belongs to a comparison, not to a check
        check("x", 1.0, at_most=2, paper=1.0)


@pytest.mark.parametrize("rule, value, verdict", [
    (dict(tol=0.1), 3.05, "reproduces"), (dict(tol=0.1), 3.2, "differs"),
    (dict(rel_tol=0.1), 3.25, "reproduces"), (dict(rel_tol=0.1), 3.35, "differs"),
    (dict(same_side_of=0), 0.5, "reproduces"), (dict(same_side_of=0), -0.5, "differs"),
    (dict(interval=(2.0, 4.0)), 2.5, "reproduces"), (dict(interval=(1.0, 2.9)), 2.5, "differs"),
    (dict(interval=(0.5, 4.0), same_side_of=0), 2.5, "reproduces"),
    (dict(interval=(-0.5, 4.0), same_side_of=0), 2.5, "undecided"),
    (dict(interval=(-4.0, -0.5), same_side_of=0), -2.5, "differs"),
    (dict(interval=(2.95, 3.04), tol=0.05), 3.0, "reproduces"),
    (dict(interval=(2.9, 3.04), tol=0.05), 3.0, "undecided"),
    (dict(interval=(3.06, 3.2), tol=0.05), 3.1, "differs"),
    (dict(interval=(2.0, 2.94), tol=0.05), 2.5, "differs"),
])
def test_comparison_rules(rule, value, verdict):
    c = compare("slope", value, paper=3.0, source="Sec. 1", reason="measured reason", **rule)
    assert (c.kind, c.verdict, c.paper, c.paper_note) == ("comparison", verdict, 3.0, "Sec. 1")
    assert c.holds, "a comparison records its verdict; it never fails the run because it differs"
    assert c.reason == ("" if verdict == "reproduces" else "measured reason")
    assert c.line().startswith(f"comparison {verdict}: slope: book")


def test_a_comparison_never_raises_for_its_verdict_and_says_when_its_reason_is_not_measured():
    c = compare("share", 0.1, paper=0.9, tol=0.1, source="Sec. 5")  # e.g. a paper run deciding otherwise
    assert (c.verdict, c.reason) == ("differs", claims.NOT_MEASURED)
    assert "differs: reason not measured" in c.line()
    c = compare("share", 0.1, paper=0.9, tol=0.1, source="Sec. 5", reason="undertrained")
    assert "differs because undertrained" in c.line()


def test_a_computed_reason_is_called_only_when_the_comparison_differs():
    calls = []

    def why(value):
        calls.append(value)
        return f"measured {value:.2f}"

    assert compare("s", 0.85, paper=0.9, tol=0.1, source="s", reason=why).reason == ""
    assert calls == []
    assert compare("s", 0.5, paper=0.9, tol=0.1, source="s", reason=why).reason == "measured 0.50"
    assert calls == [0.5]


def test_malformed_comparisons():
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("x", 1.0, paper=1.0, source="s")
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("x", 1.0, paper=1.0, source="s", tol=0.1, rel_tol=0.1)
    with pytest.raises(ValueError, match="source"):
        compare("x", 1.0, paper=1.0, source="", tol=0.1)
    with pytest.raises(ValueError, match="must contain the value"):
        compare("x", 5.0, paper=1.0, source="s", interval=(0.0, 2.0))
    with pytest.raises(ValueError, match="finite"):
        compare("x", float("nan"), paper=1.0, source="s", tol=1)


def test_precomputed_is_shown_and_recorded():
    c = check("BLEU", 14.1, at_least=10, precomputed="python scripts/train_translation.py")
    assert c.record()["precomputed"] == "python scripts/train_translation.py"
    assert "precomputed by `python scripts/train_translation.py`" in c.line()
    assert "precomputed" in claims.html_table([c])


def test_records_agree_within_the_band_only():
    committed = check("acc", 0.945, at_least=0.9, band=0.01).record()
    assert records_agree(committed, check("acc", 0.946, at_least=0.9, band=0.01).record())
    assert records_agree(committed, check("acc", 0.954, at_least=0.9, band=0.01).record())
    assert not records_agree(committed, check("acc", 0.96, at_least=0.9, band=0.01).record())
    # anything but the value must match exactly: the condition, the name, the verdict
    assert not records_agree(committed, check("acc", 0.945, at_least=0.8, band=0.01).record())
    assert not records_agree(committed, check("accuracy", 0.945, at_least=0.9, band=0.01).record())
    a = compare("d", 0.5, paper=1, same_side_of=0.4, source="s", band=0.2).record()
    b = compare("d", 0.3, paper=1, same_side_of=0.4, source="s", band=0.2, reason="r").record()
    assert not records_agree(a, b), "a flipped verdict must not pass within the band"
    # interval ends are held within the band too
    i1 = compare("g", 1.0, paper=2, interval=(0.5, 1.5), source="s", band=0.1, reason="r").record()
    i2 = compare("g", 1.0, paper=2, interval=(0.5, 1.7), source="s", band=0.1, reason="r").record()
    assert not records_agree(i1, i2)
    with pytest.raises(ValueError):
        records_agree(committed, "not a record")


def _output(*cs):
    data = cs[0]._repr_mimebundle_() if len(cs) == 1 else {
        "text/plain": repr(list(cs)), claims.MIMETYPE: [c.record() for c in cs]}
    return new_output("display_data", data=data)


def test_accept_claims_within_band_replaces_only_agreeing_claims():
    committed = [new_output("stream", name="stdout", text="hello\n"),
                 _output(check("a", 1.00, at_most=2, band=0.05), check("b", 2.0, at_most=3))]
    close = [new_output("stream", name="stdout", text="hello\n"),
             _output(check("a", 1.03, at_most=2, band=0.05), check("b", 2.01, at_most=3))]
    far = [new_output("stream", name="stdout", text="hello\n"),
           _output(check("a", 1.2, at_most=2, band=0.05), check("b", 2.0, at_most=3))]
    accepted = accept_claims_within_band(close, committed)
    assert accepted[1]["data"] == committed[1]["data"] and accepted[0] is close[0]
    assert accept_claims_within_band(far, committed)[1]["data"] == far[1]["data"]
    assert close[1]["data"] != committed[1]["data"], "the live outputs are not modified in place"


def test_a_section_without_its_file_records_one_not_available_claim():
    from attnbook.claims import NOT_AVAILABLE, REGISTRY, not_available, when_available
    from attnbook.core import runs

    missing = runs.Missing("circle_control", "paper", "no file", "python scripts/run.py circle_control --preset paper")
    before = len(REGISTRY)
    out = when_available(missing, lambda: [check("never made", 1.0, at_most=0.0)], "control: the section")
    assert len(out) == 1 and len(REGISTRY) == before + 1  # the lambda never ran: a failing check would raise
    c = out[0]
    assert (c.verdict, c.value, c.holds) == (NOT_AVAILABLE, None, True)
    assert c.precomputed == missing.command and "circle_control at preset paper" in c.condition
    assert "not available" in c.line() and c.record()["value"] is None
    shipped = {"meta": {}}  # a file that exists: the section's own claims
    assert [x.name for x in when_available(shipped, lambda: [check("made", 1.0, at_most=2.0)], "s")] == ["made"]
    with pytest.raises(ValueError, match="needs a missing file"):
        not_available("x", shipped)


def test_not_available_says_why_when_no_command_can_make_the_file():
    from attnbook.claims import not_available
    from attnbook.core import runs

    missing = runs.find("circle_seeds16", "paper")
    assert missing.command == "" and "defined at quick only" in not_available("s", missing).condition


@pytest.mark.parametrize("kw, value, verdict", [
    (dict(reaches=0.05), 0.989, "reproduces"),  # better than the paper: still the level it reports (ch 7's hull)
    (dict(reaches=0.05), 0.86, "reproduces"), (dict(reaches=0.05), 0.84, "differs"),
    (dict(reaches=0.05, lower_is_better=True), 0.80, "reproduces"),
    (dict(reaches=0.05, lower_is_better=True), 0.96, "differs"),
    (dict(reaches=0.05, interval=(0.86, 0.99)), 0.9, "reproduces"),
    (dict(reaches=0.05, interval=(0.80, 0.95)), 0.9, "undecided"),
    (dict(reaches=0.05, interval=(0.70, 0.84)), 0.8, "differs"),
])
def test_a_level_reached_is_one_sided(kw, value, verdict):
    c = compare("hull accuracy", value, paper=0.9, source="Fig. 4", reason="measured", **kw)
    assert c.verdict == verdict
    assert ("at most" if kw.get("lower_is_better") else "at least") in c.condition


def test_reaches_is_one_rule_among_the_others():
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("x", 1.0, paper=1.0, source="s", reaches=0.1, tol=0.1)
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("x", 1.0, paper=1.0, source="s", reaches=0.1, same_side_of=0.5, interval=(0.5, 1.5))
    with pytest.raises(ValueError, match="goes with reaches"):
        compare("x", 1.0, paper=1.0, source="s", tol=0.1, lower_is_better=True)
    with pytest.raises(ValueError, match="non-negative"):
        compare("x", 1.0, paper=1.0, source="s", reaches=-0.1)


@pytest.mark.parametrize("value, chance, p, p_below, verdict", [
    (0.4, 0.0, 0.01, 0.99, "reproduces"),  # above chance, significant
    (0.4, 0.0, 0.2, 0.8, "undecided"),     # above chance, the test cannot tell it from chance
    (-0.1, 0.0, 0.7, 0.3, "undecided"),    # under chance within its noise: no evidence the effect is absent
    (-0.4, 0.0, 0.99, 0.01, "differs"),    # below chance beyond its noise
    (0.0, 0.0, 0.5, 0.5, "undecided"),     # at chance is not above it
])
def test_a_qualitative_statement_is_decided_against_chance(value, chance, p, p_below, verdict):
    c = claims.compare("rho", value, paper=1, above_chance=(chance, p, p_below), source="Sec. 4",
                       reason="measured")
    assert c.verdict == verdict
    assert "one-sided p < 0.05" in c.condition


@pytest.mark.parametrize("value, p, p_below, smallest_p, verdict", [
    (0.0, 1.0, 0.125, 0.125, "undecided"),  # the opposite of the paper's, but 8 ranks cannot reach p < 0.05
    (1.0, 0.125, 1.0, 0.125, "undecided"),  # the paper's side at its most extreme: still cannot decide
    (1.0, 0.05, 1.0, 0.05, "undecided"),    # 20 heads: the best rank gives p = 0.05, not below it
    (0.0, 1.0, 0.01, 0.01, "differs"),      # a test that could decide: the usual rule
    (1.0, 0.01, 1.0, 0.01, "reproduces"),
    (0.0, 1.0, 0.01, 0.125, "undecided"),   # below chance by p_below, but a test that cannot decide says so
])
def test_a_test_that_cannot_reach_the_level_leaves_the_verdict_undecided(value, p, p_below, smallest_p, verdict):
    c = claims.compare("layer 1", value, paper=1, above_chance=(0.5, p, p_below), smallest_p=smallest_p,
                       source="Sec. 4", reason="measured")
    assert c.verdict == verdict
    assert ("cannot decide" in c.condition) == (smallest_p >= 0.05)


@pytest.mark.parametrize("value, p, p_below, verdict", [
    (0.585, 1.0, 0.4, "undecided"),   # a hair under the line, within its noise: not shown below it
    (0.557, 1.0, 0.01, "differs"),    # below the line beyond its noise
    (0.63, 0.01, 0.99, "reproduces"),
    (0.60, 0.2, 0.8, "undecided"),    # above, within its noise
    (0.55, 1.0, 0.05, "undecided"),   # p_below at 0.05 is not below it
    (0.55, 1.0, 0.0499, "differs"),
])
def test_with_a_test_below_chance_differs_needs_its_evidence(value, p, p_below, verdict):
    c = claims.compare("hull", value, paper=1, above_chance=(0.587, p, p_below), chance_name="the majority line",
                       source="Fig. 4", reason="measured")
    assert c.verdict == verdict
    assert "differs only when below the majority line with one-sided p < 0.05" in c.condition
    with pytest.raises(ValueError, match="one test"):  # above the line and shown below it: inconsistent
        claims.compare("hull", 0.63, paper=1, above_chance=(0.587, 0.5, 0.01), chance_name="the majority line",
                       source="Fig. 4")
    with pytest.raises(ValueError, match="p must be in"):
        claims.compare("hull", value, paper=1, above_chance=(0.587, p, 1.5), chance_name="the majority line",
                       source="Fig. 4")


def test_smallest_p_is_a_possible_p_of_the_chance_rule():
    with pytest.raises(ValueError, match="smallest possible p"):
        claims.compare("x", 0.0, paper=1, above_chance=(0.5, 0.5, 0.5), smallest_p=0.6, source="s")
    with pytest.raises(ValueError, match="goes with the above_chance rule"):
        claims.compare("x", 0.0, paper=1, same_side_of=0.5, smallest_p=0.1, source="s")


def test_above_chance_needs_a_direction_and_a_probability():
    with pytest.raises(ValueError, match="paper=1"):
        claims.compare("rho", 0.4, paper=0.5, above_chance=(0.0, 0.01, 0.99), source="Sec. 4")
    with pytest.raises(ValueError, match="p must be in"):
        claims.compare("rho", 0.4, paper=1, above_chance=(0.0, 1.5, 0.5), source="Sec. 4")
    with pytest.raises(ValueError, match="p_below"):  # the test turned the other way is part of the rule
        claims.compare("rho", 0.4, paper=1, above_chance=(0.0, 0.01), source="Sec. 4")


def test_an_analogue_names_its_model_and_keeps_its_verdict():
    c = claims.compare("share", 0.9, paper=0.9, tol=0.1, source="Sec. 5", analogue="MiniLM")
    assert (c.kind, c.verdict) == (claims.ANALOGUE, "reproduces")
    assert c.paper_note == "analogue on MiniLM, not the paper's model or experiment; Sec. 5"


def test_a_gate_that_fails_is_recorded_not_raised():
    ok = claims.gate("gain of training on", 0.2, at_most=0.5, guards="the head analyses")
    bad = claims.gate("gain of training on", 1.1, at_most=0.5, guards="the head analyses")
    assert (ok.kind, ok.verdict, ok.holds, ok.reason) == ("gate", "passes", True, "")
    assert (bad.kind, bad.verdict, bad.holds) == ("gate", "fails", False)
    assert bad.reason == "failed: the head analyses" and "failed: the head analyses" in bad.line()
    with pytest.raises(ValueError, match="guards"):
        claims.gate("gain", 0.2, at_most=0.5, guards="")
    with pytest.raises(ValueError, match="condition"):
        claims.gate("gain", 0.2, guards="x")


def test_guarded_makes_the_claims_only_when_every_gate_passes():
    ok = claims.gate("late loss drop", 0.01, at_most=0.05, guards="the comparison")
    bad = claims.gate("late loss drop", 0.2, at_most=0.05, guards="the comparison")
    made = []

    def analysis():
        made.append(1)
        return [claims.check("accuracy", 0.9, at_least=0.5)]

    assert [c.name for c in claims.guarded([ok], analysis)] == ["late loss drop", "accuracy"]
    assert made == [1]
    out = claims.guarded([ok, bad], analysis)  # one failing gate withholds everything
    assert out == [ok, bad] and made == [1]  # and the analysis is never run
    with pytest.raises(ValueError, match="gates"):
        claims.guarded([claims.check("not a gate", 1.0, at_most=2.0)], analysis)
    with pytest.raises(ValueError, match="gates"):
        claims.guarded([], analysis)


def test_the_result_box_lists_each_comparison_with_its_verdict_and_counts_the_rest():
    from attnbook.claims.api import Claim
    from attnbook.claims.render import result_summary

    made = [Claim("slope", 3.1, "within 0.5 of 3", kind="comparison", verdict="reproduces"),
            Claim("delay", 0.2, "above 0", kind="comparison", verdict="undecided"),
            Claim("mlp", -1.0, "above 0", kind="comparison", verdict="differs"),
            Claim("row sums", 1.0, "== 1"), Claim("gap", 0.4, "<= 0.1", holds=False, verdict="fails"),
            Claim("converged", 0.8, "< 0.5", kind="gate", holds=False, verdict="fails"),
            Claim("minilm", 0.9, "> 0", kind="analogue", verdict="reproduces"),
            Claim("wider minus narrower", 0.1, "t test", kind="finding", verdict="not shown"),
            Claim("all minus half", 0.2, "t test", kind="finding", verdict="higher"),
            Claim("slope", 3.2, "within 0.5 of 3", kind="comparison", verdict="reproduces")]  # run again
    box = result_summary(made)
    assert "of 3 comparisons, 1 reproduces, 1 differs and 1 is undecided" in box
    assert box.index("*reproduces* (1): slope") < box.index("*undecided* (1): delay") < box.index("*differs* (1): mlp")
    many = result_summary([Claim(f"c{i}", 1.0, "> 0", kind="comparison", verdict="reproduces") for i in range(5)])
    assert "*reproduces* (5): c0; c1; c2; and 2 more" in many and "5 reproduce, 0 differ and 0 are" in many
    assert "1 of 2 hold" in box and "converged" in box and "1 of 1 agree" in box
    assert "own experiments** (a difference between two of its arms, by a stated test): of 2, 1 higher, 1 not shown." in box
    assert "*Not shown*: the interval contains 0" in box
    assert "no number with a paper's" in result_summary([Claim("row sums", 1.0, "== 1")])
    only_analogues = result_summary([Claim("share", 0.5, ">= 0.4", kind="analogue", verdict="differs")])
    assert "no comparison on the paper's own model" in only_analogues and "no number" not in only_analogues


def test_a_verdict_in_words_names_what_was_decided():
    rule = dict(paper=0.8, source="Sec. 4.1", reaches=0)
    assert compare("level", 0.9, **rule).in_words == "reproduces"
    assert compare("level", 0.6, **rule).in_words == "does not reproduce"
    straddles = compare("level", 0.8, interval=(0.7, 0.9), **rule)
    assert straddles.in_words == "is undecided"
    assert check("c", 1.0, at_least=0).in_words == "holds"
    from attnbook.core.runs import Missing

    missing = claims.not_available("a precomputed claim", Missing("a_run", "paper", "no file", "cmd"))
    assert missing.in_words == "is not available"


@pytest.mark.parametrize("interval, verdict", [((0.05, 0.35), "higher"), ((-0.35, -0.05), "lower"),
                                               ((-0.1, 0.5), "not shown"), ((0.0, 0.4), "not shown"),
                                               ((-0.4, 0.0), "not shown"), (None, "undecided")])
def test_a_finding_is_decided_by_its_interval_against_zero(interval, verdict):
    value = 0.2 if interval is None or interval[0] >= 0 or interval[1] > 0.2 else -0.2
    value = -0.2 if interval == (-0.4, 0.0) else value
    f = claims.finding("all minus half", value, interval=interval, test="t test over seeds (1 dof)")
    assert (f.kind, f.verdict, f.paper, f.holds) == (claims.FINDING, verdict, None, True)
    assert "t test over seeds (1 dof): 95% interval" in f.condition
    assert ("the test gives no interval" in f.line()) == (verdict == "undecided")
    assert f.record()["interval"] == (None if interval is None else list(interval))


def test_a_malformed_finding_is_refused():
    with pytest.raises(ValueError, match="which test"):
        claims.finding("d", 0.2, interval=(0.1, 0.3), test="")
    with pytest.raises(ValueError, match="lo <= hi"):
        claims.finding("d", 0.2, interval=(0.3, 0.1), test="t")
    # a percentile bootstrap interval may miss its point estimate: recorded, decided by the interval
    assert claims.finding("d", 0.5, interval=(0.1, 0.3), test="t").verdict == "higher"
    with pytest.raises(ValueError, match="level"):
        claims.finding("d", 0.2, interval=(0.1, 0.3), test="t", level=95)
    with pytest.raises(ValueError, match="finite"):
        claims.finding("d", float("nan"), interval=None, test="t")


def test_above_chance_names_its_floor_in_the_rule():
    c = claims.compare("hull", 0.63, paper=1, above_chance=(0.587, 0.06, 0.94), chance_name="the majority line",
                       source="Fig. 4", reason="measured")
    assert c.condition.startswith("above the majority line (0.587)") and c.verdict == "undecided"
    assert claims.compare("x", 0.4, paper=1, above_chance=(0.1, 0.01, 0.99), source="s").condition.startswith(
        "above chance (0.1)")
    hidden = claims.compare("y", 0.4, paper=1, above_chance=(0.1234, 0.0123, 0.99), test_in_rule=False, source="s")
    assert "0.01" not in hidden.condition and "0.12" not in hidden.condition and "printed" in hidden.condition
    # the verdict still uses p and the floor
    assert hidden.verdict == "reproduces"
    assert claims.compare("y", 0.4, paper=1, above_chance=(0.1, 0.2, 0.8), test_in_rule=False, source="s",
                          reason="measured").verdict == "undecided"
    assert claims.compare("y", 0.4, paper=1, above_chance=(0.5, 0.99, 0.01), test_in_rule=False, source="s",
                          reason="measured").verdict == "differs"
    with pytest.raises(ValueError, match="chance_name"):
        claims.compare("x", 0.4, paper=1, above_chance=(0.1, 0.01, 0.99), chance_name="", source="s")


def test_a_comparison_whose_data_cannot_decide_is_undecided_whatever_the_value():
    rule = dict(paper=1.0, same_side_of=0, source="Fig. 3")
    assert compare("d", 5.0, interval=(4.0, 6.0), **rule).verdict == "reproduces"
    blind = compare("d", 5.0, interval=(4.0, 6.0), cannot_decide="every run censored", **rule)
    assert blind.verdict == "undecided" and blind.condition.endswith("every run censored, so it cannot decide")
    assert compare("d", -5.0, interval=(-6.0, -4.0), cannot_decide="x", **rule).verdict == "undecided"


def test_an_equivalence_margin_says_so_and_does_not_mix_with_a_relative_tolerance():
    c = compare("gap", 0.0, paper=0.0, tol=0.05, interval=(-0.02, 0.01), source="Fig. 4")
    assert c.verdict == "reproduces" and "equivalence margin" in c.condition and "within 0.05" in c.condition
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("gap", 0.0, paper=0.0, rel_tol=0.05, interval=(-0.02, 0.01), source="Fig. 4")
    with pytest.raises(ValueError, match="exactly one agreement rule"):
        compare("gap", 0.0, paper=0.0, tol=0.05, same_side_of=0, interval=(-0.02, 0.01), source="Fig. 4")


def test_an_undecided_claim_s_line_says_what_left_it_undecided():
    straddles = compare("d", 1.0, paper=1.0, same_side_of=0, interval=(-1.0, 2.0), source="s")
    assert "the interval straddles" in straddles.line()
    untested = compare("r", 0.6, paper=1, above_chance=(0.5, 0.2, 0.8), source="s")
    assert "does not reach p < 0.05" in untested.line() and "straddles" not in untested.line()
    blind = compare("d", 0.0, paper=1.0, same_side_of=0, interval=(0.0, 0.0), cannot_decide="none merge",
                    source="s")
    assert "cannot decide" in blind.line() and "straddles" not in blind.line()


@pytest.mark.parametrize("p, shown", [(0.0496, "0.0496"), (0.0504, "0.0504"), (0.00314, "0.0031"), (0.167, "0.17")])
def test_the_rule_prints_p_so_that_it_never_reads_as_the_level(p, shown):
    """Two significant digits, three near 0.05: p = 0.0496 must not print as "0.05" beside "p < 0.05"."""
    c = claims.compare("rho", 0.4, paper=1, above_chance=(0.0, p, 1 - p), source="Sec. 4", reason="measured")
    assert f"(here p = {shown})" in c.condition


def test_every_rule_decides_exactly_at_its_boundary():
    """One case per rule at its exact threshold (a mutation audit found the rules' <= / < untested there), plus a
    negative paper value with a relative tolerance and a lower-is-better level with an interval."""
    from attnbook.claims import check, compare

    assert check("x", -1.0, at_most=0.0).band == pytest.approx(0.02)  # the default band is relative to |value|
    with pytest.raises(ClaimFailed):
        check("inf", float("inf"), at_least=0.0)  # a non-finite value never holds
    assert check("x", 1.5, close_to=1.0, tol=0.5).holds  # exactly at the tolerance holds
    assert compare("x", 3.5, paper=3.0, tol=0.5, source="s").verdict == "reproduces"
    assert compare("x", -3.25, paper=-3.0, rel_tol=0.1, source="s").verdict == "reproduces"
    # an interval reaching past paper + tol cannot decide "within tol"
    assert compare("x", 3.1, paper=3.0, tol=0.05, interval=(3.02, 3.2), source="s").verdict == "undecided"
    # a test against chance: p = 0.05 is not below 0.05, and a value at chance is not above it
    assert compare("r", 0.4, paper=1, above_chance=(0.0, 0.05, 0.95), source="s").verdict == "undecided"
    assert compare("r", 0.5, paper=1, above_chance=(0.5, 0.01, 0.99), source="s").verdict == "undecided"
    assert compare("a", 0.25, paper=0.5, reaches=0.25, source="s").verdict == "reproduces"  # 0.5 - 0.25 reached
    low = compare("e", 0.9, paper=0.9, reaches=0.05, lower_is_better=True, interval=(0.80, 0.97), source="s")
    assert low.verdict == "undecided"  # lower is better: the interval's upper end must stay within the margin
    assert compare("d", 0.0, paper=3.0, same_side_of=0, source="s").verdict == "differs"  # 0 is not above 0
    assert compare("c", 2.5, paper=3.0, interval=(2.0, 3.0), source="s").verdict == "reproduces"  # ends included
    assert compare("d", 1.0, paper=1.0, same_side_of=0, interval=(-1.0, 2.0), source="s").reason == ""
