#!/bin/sh
# Launcher of `helm nemo`: the project venv first, then a `helm-nemo` on PATH, else a clear message.
DIR="${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
if [ -x "$DIR/.venv/bin/python" ]; then
  exec "$DIR/.venv/bin/python" -m helm_nemo "$@"
fi
if command -v helm-nemo >/dev/null 2>&1; then
  exec helm-nemo "$@"
fi
echo "helm nemo: no Python environment found." >&2
echo "  Run 'make setup' in $DIR (creates $DIR/.venv), or 'pip install helm-nemo' so 'helm-nemo' is on PATH." >&2
exit 2
