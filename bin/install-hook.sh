#!/bin/sh
# Builds the plugin's private Python environment: $HELM_PLUGIN_DIR/venv with helm-nemo and its dependencies.
# Run by `helm plugin install` / `helm plugin update` (hooks in plugin.yaml) and by bin/nemo.sh on first use
# when the environment is missing. Idempotent (a stamp holds the version installed), atomic (built in a
# temporary folder, then renamed), offline when the plugin bundles its wheels (wheels/, the release tarball),
# and writes nothing outside the plugin folder (no pip cache). Exit 2 with one message when it cannot.
set -u
DIR="${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
VENV="$DIR/venv"
say() { echo "helm nemo: $*" >&2; }
fail() { say "$1"; [ -n "${2:-}" ] && echo "    hint: $2" >&2; exit 2; }

VERSION="$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$DIR/plugin.yaml" | head -n 1)"
[ -n "$VERSION" ] || fail "cannot read the plugin version from $DIR/plugin.yaml"

# A development checkout that ran `make setup` has its own .venv: nothing to build.
if [ -x "$DIR/.venv/bin/python" ] && "$DIR/.venv/bin/python" -c 'import helm_nemo' 2>/dev/null; then
  say "using the checkout's environment $DIR/.venv"
  exit 0
fi
if [ -f "$VENV/.helm-nemo-version" ] && [ "$(cat "$VENV/.helm-nemo-version")" = "$VERSION" ] \
   && "$VENV/bin/python" -c 'import helm_nemo' 2>/dev/null; then
  say "Python environment for helm-nemo $VERSION is ready ($VENV)"
  exit 0
fi

# Python >= 3.11: $HELM_NEMO_PYTHON, else python3, else python.
PYTHON=""
for candidate in "${HELM_NEMO_PYTHON:-}" python3 python; do
  [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 && { PYTHON="$candidate"; break; }
done
[ -n "$PYTHON" ] || fail "Python 3.11 or newer is required and none was found on PATH" \
  "install Python >= 3.11, or set HELM_NEMO_PYTHON=/path/to/python3.11, then: helm plugin update nemo"
FOUND="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"
case "$FOUND" in
  3.1[1-9]|3.[2-9][0-9]|[4-9].*) ;;
  *) fail "Python 3.11 or newer is required; $(command -v "$PYTHON") is ${FOUND:-not a working Python}" \
       "install Python >= 3.11, or set HELM_NEMO_PYTHON=/path/to/python3.11, then: helm plugin update nemo" ;;
esac

BUILD="$DIR/.venv-build.$$"
trap 'rm -rf "$BUILD"' EXIT INT TERM
rm -rf "$BUILD"
say "setting up the Python environment for helm-nemo $VERSION with $(command -v "$PYTHON") (Python $FOUND), once"
"$PYTHON" -m venv "$BUILD" >/dev/null 2>"$BUILD.log" || {
  LOG="$(tail -n 3 "$BUILD.log" 2>/dev/null)"; rm -f "$BUILD.log"
  fail "could not create a virtual environment with $PYTHON: $LOG" "on Debian/Ubuntu: apt-get install python3-venv"; }
rm -f "$BUILD.log"
PIP_ARGS="--quiet --disable-pip-version-check --no-cache-dir --no-input"
if ls "$DIR"/wheels/helm_nemo-"$VERSION"-*.whl >/dev/null 2>&1; then
  WHAT="helm-nemo==$VERSION"; SOURCE="the bundled wheels ($DIR/wheels)"
  set -- --no-index --find-links "$DIR/wheels" "$WHAT"
elif [ -f "$DIR/pyproject.toml" ] && [ -f "$DIR/requirements/runtime.lock" ]; then
  # a checkout: the dependencies at their locked versions (hashes checked), then the package itself
  WHAT="$DIR"; SOURCE="the package index (building from $DIR, dependencies from requirements/runtime.lock)"
  # shellcheck disable=SC2086
  if ! OUT="$(PIP_NO_CACHE_DIR=1 "$BUILD/bin/python" -m pip install $PIP_ARGS --require-hashes --no-deps \
              -r "$DIR/requirements/runtime.lock" 2>&1)"; then
    fail "could not install the dependencies of $WHAT from $SOURCE: $(printf '%s\n' "$OUT" | grep -v '^ *$' | tail -n 2 | tr '\n' ' ')" \
      "check access to the package index (PIP_INDEX_URL), or install the release tarball helm-nemo-$VERSION.tgz, which bundles every dependency"
  fi
  set -- --no-deps "$DIR"
elif [ -f "$DIR/pyproject.toml" ]; then
  WHAT="$DIR"; SOURCE="the package index (building from $DIR)"
  set -- "$DIR"
else
  WHAT="helm-nemo==$VERSION"; SOURCE="the package index"
  set -- "$WHAT"
fi
# shellcheck disable=SC2086
if ! OUT="$(PIP_NO_CACHE_DIR=1 "$BUILD/bin/python" -m pip install $PIP_ARGS "$@" 2>&1)"; then
  fail "could not install $WHAT from $SOURCE: $(printf '%s\n' "$OUT" | grep -v '^ *$' | tail -n 2 | tr '\n' ' ')" \
    "check access to the package index (PIP_INDEX_URL), or install the release tarball helm-nemo-$VERSION.tgz, which bundles every dependency"
fi
echo "$VERSION" > "$BUILD/.helm-nemo-version"
rm -rf "$VENV" && mv "$BUILD" "$VENV" || fail "could not move the environment into $VENV"
trap - EXIT INT TERM
say "Python environment ready: $VENV"
