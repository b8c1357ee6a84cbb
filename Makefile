# The two commands of the README: `make demo` and `make test`. Both set up a fresh machine first.
VENV := .venv
PY := $(VENV)/bin/python
export HELM3 := $(CURDIR)/.tools/helm3/helm
export HELM4 := $(CURDIR)/.tools/helm4/helm

.PHONY: setup demo test generate check bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	@bash scripts/demo.sh

test: setup
	$(PY) -m pytest -q

generate: setup
	$(VENV)/bin/helm-nemo generate

check: setup
	$(VENV)/bin/helm-nemo generate --check

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .tools .pytest_cache
