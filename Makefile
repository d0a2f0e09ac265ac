# The two commands a newcomer needs (see README): `make serve` and `make test`.
.PHONY: serve test lint install prepare doctor bench-engines

install:
	@bash scripts/install.sh

prepare: install
	@.venv/bin/python -m sub250 models prepare

serve: prepare
	@.venv/bin/python -m sub250 serve

# ruff and mypy on app/ first (scripts/lint.sh): a finding fails the target before any test runs
lint: install
	@bash scripts/lint.sh

test: install
	@bash scripts/lint.sh
	@bash scripts/install-browser.sh
	@bash scripts/install-fleet-tools.sh
	@bash scripts/install-phone-tools.sh
	@bash scripts/install-clients.sh
	@.venv/bin/python -m sub250 models prepare
	@.venv/bin/python -m pytest -ra

doctor: prepare
	@.venv/bin/python -m sub250 doctor

bench-engines: prepare
	@.venv/bin/python scripts/bench_engines.py
