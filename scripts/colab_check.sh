#!/usr/bin/env bash
# A Colab-like check: does a chapter run when attnbook is installed the way the Colab cell installs it?
#
#     bash scripts/colab_check.sh                      # chapter 1
#     bash scripts/colab_check.sh book/<part>/<NN>_<name>.ipynb ...
#
# Colab has its own torch, Jupyter, nbclient and ipykernel, and the Colab cell installs only the package
# with its loose pyproject.toml bounds (`pip install "attnbook @ git+<repository.url>"`). This script does the
# same from the local clone: a fresh virtual environment with only torch==2.13.0 (the CPU wheel here) and the
# notebook runtime, then `pip install <repo>` (not editable, so the package data must be packaged), then each
# notebook is executed end to end with nbclient from a temporary folder outside the repository (quick
# preset on a CPU). It prints pass/fail and the time taken for the install and for each notebook.
# Not part of `make test`: the fresh install alone takes minutes (see the README).
set -uo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
NOTEBOOKS=("$@")
[ ${#NOTEBOOKS[@]} -eq 0 ] && NOTEBOOKS=("book/part1_rank_collapse/01_pure_attention_loses_rank.ipynb")

WORK="$(mktemp -d /tmp/attnbook-colab-check.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
PIP=(env PIP_DISABLE_PIP_VERSION_CHECK=1 "$WORK/venv/bin/pip" install --quiet)
pip_install() {  # quiet pip; drop the notes about configured local indexes that a machine may lack
    "${PIP[@]}" "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
}

start=$(date +%s)
"$PYTHON" -m venv "$WORK/venv" || { echo "colab check: FAIL (could not create a virtual environment)"; exit 1; }
echo "== torch==2.13.0 and the notebook runtime, as Colab has them"
pip_install torch==2.13.0 nbclient nbformat ipykernel || { echo "colab check: FAIL (preinstall)"; exit 1; }
echo "== pip install $REPO (the package and its loose dependencies only)"
# Copy the repository without its virtual environments and build outputs, as a fresh clone would be.
mkdir -p "$WORK/src"
tar -C "$REPO" --exclude=./.venv --exclude=./.venv-data --exclude=./_build --exclude=./.assets \
    --exclude=./.git --exclude='*.egg-info' -cf - . | tar -C "$WORK/src" -xf -
pip_install "$WORK/src" || { echo "colab check: FAIL (pip install of the package)"; exit 1; }
installed=$(date +%s)
echo "install: $((installed - start)) s"
"$WORK/venv/bin/pip" list 2>/dev/null | grep -i -E "^(torch|numpy|scipy|matplotlib|ipywidgets|transformers|tokenizers|attnbook) " || true

status=0
for nb in "${NOTEBOOKS[@]}"; do
    mkdir -p "$WORK/run"
    cp "$REPO/$nb" "$WORK/run/"
    t0=$(date +%s)
    if (cd "$WORK/run" && MPLBACKEND=Agg timeout 1800 "$WORK/venv/bin/python" - "$(basename "$nb")" <<'EOF'
import sys
import nbformat
from nbclient import NotebookClient

path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
records = [
    o["data"]["application/vnd.attnbook.claim+json"] for c in nb.cells if c.cell_type == "code"
    for o in c.outputs if "application/vnd.attnbook.claim+json" in o.get("data", {})
]
claims = sum(len(r) if isinstance(r, list) else 1 for r in records)
print(f"executed {path}: {claims} checked claims hold")
EOF
    ); then
        echo "colab check: PASS $nb ($(( $(date +%s) - t0 )) s)"
    else
        echo "colab check: FAIL $nb ($(( $(date +%s) - t0 )) s)"
        status=1
    fi
done
echo "total: $(( $(date +%s) - start )) s"
exit $status
