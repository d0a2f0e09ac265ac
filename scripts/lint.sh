#!/usr/bin/env bash
# The lint and type checks `make test` runs before pytest: ruff and mypy on app/ (their rules: pyproject.toml's
# [tool.ruff] and [tool.mypy]; their versions: requirements/test.txt). Exits non-zero on any finding.
#
#   bash scripts/lint.sh            # after scripts/install.sh (make install)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
[ -x "$bin/ruff" ] && [ -x "$bin/mypy" ] || { echo "lint: ruff/mypy missing from .venv: run scripts/install.sh" >&2; exit 1; }

echo "lint: ruff check app/"
"$bin/ruff" check app/

# mypy checks the package by the name it is imported by (sub250, its source in app/): a link gives it that name
# (pyproject's mypy_path), and the errors are reported at their app/ paths.
mkdir -p build/mypy
ln -sfn ../../app build/mypy/sub250
echo "lint: mypy (package sub250 = app/)"
"$bin/mypy" 2>&1 | sed 's#^build/mypy/sub250/#app/#'
