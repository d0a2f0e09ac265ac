#!/usr/bin/env bash
# The real client libraries the conformance tests drive (tests/clients/), in a venv of their own: the OpenAI
# Agents SDK 0.24 needs websockets < 17, the server runs on 17. Idempotent; called by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-clients
STAMP="$VENV/.installed-$(sha256sum requirements/clients.txt | cut -c1-16)"
[ -f "$STAMP" ] && exit 0
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements/clients.txt
rm -f "$VENV"/.installed-*
touch "$STAMP"
echo "clients' venv ready: $VENV ($(grep -c '==' requirements/clients.txt) pinned packages, openai-agents among them)"
