import pytest

from attnbook import claims
from attnbook.claims import ClaimFailed, check


def test_claim_that_holds_is_recorded_and_rounded():
    c = check("ratio", 0.0123456, paper=0.02, at_most=0.05)
    assert c.holds and c.value == 0.0123 and c.paper == 0.02
    assert claims.REGISTRY[-1] is c
    assert "claim holds: ratio: book 0.0123 [<= 0.05]; paper 0.02" == c.line()
    bundle = c._repr_mimebundle_()
    assert bundle[claims.MIMETYPE]["name"] == "ratio" and bundle["text/plain"] == c.line()


def test_failed_claim_raises_with_everything():
    with pytest.raises(ClaimFailed) as err:
        check("accuracy", 0.5, paper=0.98, close_to=0.98, tol=0.05)
    msg = str(err.value)
    assert "accuracy" in msg and "0.5" in msg and "0.98" in msg and "within 0.05 of 0.98" in msg


def test_conditions_combine():
    assert check("range", 0.5, at_least=0.1, at_most=0.9).condition == ">= 0.1, <= 0.9"
    with pytest.raises(ClaimFailed):
        check("range", 1.5, at_least=0.1, at_most=0.9)
    c = check("even", 4, predicate=lambda v: v % 2 == 0, description="is even")
    assert c.condition == "is even"


def test_nan_never_holds():
    with pytest.raises(ClaimFailed):
        check("nan", float("nan"), at_most=1.0)


def test_malformed_claims():
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
