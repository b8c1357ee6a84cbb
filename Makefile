# The two commands of the README: `make demo` and `make test`. Both set up a fresh machine first.
VENV := .venv
PY := $(VENV)/bin/python
export HELM3 := $(CURDIR)/.tools/helm3/helm
export HELM4 := $(CURDIR)/.tools/helm4/helm

.PHONY: setup demo test lint cluster generate check bench bench-real dist lock clean

setup:
	@bash scripts/setup.sh

demo: setup
	@bash scripts/demo.sh

# The tests need more than `setup`: real servers, no mocks: the OCI registry (Debian's docker-registry) for the
# publish tests, Slurm (Debian's slurm-wlm and munge) for the Slurm target's tests, and the real Kubernetes
# control plane (`make cluster`) for the cluster tests (HELM_NEMO_SKIP_CLUSTER=1: neither built nor run).
# Two pytest workers (pytest-xdist): one starts the control plane and runs the tests on it, which mostly wait on
# it, while the other runs the CPU-bound rest (tests/conftest.py groups them; docs/testing.md has the figures).
PYTEST_WORKERS ?= 2
test:
	@WITH_REGISTRY=1 WITH_SLURM=1 bash scripts/setup.sh
	@if [ "$${HELM_NEMO_SKIP_CLUSTER:-0}" != 1 ]; then bash scripts/cluster.sh >/dev/null; fi
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder

# ruff (lint and format) and mypy as configured in pyproject.toml (mypy: strict on helm_nemo/, with its stated exceptions).
lint: setup
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy

# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, JobSet, Kueue and kwok, built from the Go module
# tests/cluster/ into ~/.cache/helm-nemo/cluster/<lock hash>/bin (once per lock; see docs/testing.md).
cluster:
	@bash scripts/cluster.sh

generate: setup
	$(VENV)/bin/helm-nemo generate

check: setup
	$(VENV)/bin/helm-nemo generate --check

# Every target as a ratio to a reference measured in the same run; `report` of a failed 1,024-pod JobSet runs on
# the real control plane (built first, as `make test` does; about 6 minutes, most of it kwok bringing the pods up).
bench: setup cluster
	$(PY) bench/run.py --check

# preflight (1,000 nodes, 5,000 pods) and status (512 pods) on the emulator and the real control plane, side by
# side (about 5 minutes: most of it is kwok bringing the pods up; docs/performance.md).
bench-real: setup cluster
	$(PY) bench/real_cluster_bench.py

dist: setup
	$(PY) scripts/dist.py

# Refresh requirements/*.lock (newest releases within pyproject.toml's ranges) and say what changed.
lock: setup
	$(PY) scripts/lock.py

clean:
	rm -rf $(VENV) .tools .pytest_cache dist build
