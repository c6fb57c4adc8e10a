"""Tests of attnbook.claims.papers: every paper number has a value and says where it was read."""

from __future__ import annotations

import json

import pytest

from attnbook.claims import papers


def test_every_number_says_where_it_was_read():
    files = sorted(papers.FOLDER.glob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        assert data["paper"] and data["numbers"]
        for name in data["numbers"]:
            value, where = papers.number(path.stem, name)
            assert value is not None and len(where) > 20, (path.stem, name)


def test_unknown_paper_or_number_is_an_error():
    with pytest.raises(ValueError, match="no paper"):
        papers.number("nobody2020", "x")
    with pytest.raises(ValueError, match="has no number"):
        papers.number("voita2019", "nothing")
    assert papers.number("michel2019", "prunable_share_wmt").value == 0.2


def test_numbers_reads_every_number_of_a_paper():
    every = papers.numbers("voita2019")
    data = json.loads((papers.FOLDER / "voita2019.json").read_text())["numbers"]
    assert list(every) == list(data)
    assert every["rare_token_head_share"] == papers.number("voita2019", "rare_token_head_share")
    with pytest.raises(ValueError, match="no paper"):
        papers.numbers("nobody2020")
