#!/bin/sh
# Launcher of `helm nemo`: the checkout's .venv (make setup), else the plugin's own venv (built by the install
# hook, rebuilt here if it went missing), else a `helm-nemo` on PATH (pip install helm-nemo), else one message.
# `-c` rather than `-m helm_nemo`: runpy's import and module search cost a few ms on every run.
RUN='from helm_nemo.cli import run; run()'
DIR="${HELM_PLUGIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
if [ -x "$DIR/.venv/bin/python" ]; then
  exec "$DIR/.venv/bin/python" -c "$RUN" "$@"
fi
if [ -x "$DIR/venv/bin/python" ] && [ -f "$DIR/venv/.helm-nemo-version" ]; then
  # The hook's venv holds only the bundled wheels (no .pth file is needed): `-S` skips the site module
  # (~3 ms a run) and its site-packages goes on sys.path by hand, passed as the first argument.
  for SITE in "$DIR"/venv/lib/python3*/site-packages; do :; done
  if [ -d "$SITE" ]; then
    exec "$DIR/venv/bin/python" -S -c "import sys; sys.path.append(sys.argv.pop(1)); $RUN" "$SITE" "$@"
  fi
  exec "$DIR/venv/bin/python" -c "$RUN" "$@"
fi
if [ -d "$DIR/wheels" ] || [ -f "$DIR/pyproject.toml" ]; then
  echo "helm nemo: the plugin's Python environment is missing; rebuilding it" >&2
  sh "$DIR/bin/install-hook.sh" || exit 2
  exec "$DIR/venv/bin/python" -c "$RUN" "$@"
fi
if command -v helm-nemo >/dev/null 2>&1; then
  exec helm-nemo "$@"
fi
echo "helm nemo: no Python environment found in $DIR." >&2
echo "    hint: reinstall the plugin from its release tarball (helm plugin install .../helm-nemo-VERSION.tgz)," >&2
echo "          or 'pip install helm-nemo' so that 'helm-nemo' is on PATH." >&2
exit 2
