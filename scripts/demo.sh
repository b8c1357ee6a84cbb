#!/usr/bin/env bash
# The main job end to end: the seed 001 recipe (Llama-3.1-405B on 54 x A3 Ultra) rendered through the
# Helm plugin (`helm nemo template`) installed into an isolated helm home, then a manifest summary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
HELM="${HELM:-$ROOT/.tools/helm4/helm}"
HOME_DIR="$(mktemp -d)"
trap 'rm -rf "$HOME_DIR"' EXIT
export HELM_DATA_HOME="$HOME_DIR/data" HELM_CONFIG_HOME="$HOME_DIR/config" HELM_CACHE_HOME="$HOME_DIR/cache"
unset HELM_PLUGINS

echo "== helm $("$HELM" version --template '{{.Version}}'): installing the plugin from $ROOT"
"$HELM" plugin install "$ROOT" >/dev/null
"$HELM" plugin list

# Project-specific names the recipe takes from the environment (here: stand-ins).
export PROJECT_ID="${PROJECT_ID:-demo-project}" GCS_BUCKET="${GCS_BUCKET:-demo-bucket}" KUEUE_NAME="${KUEUE_NAME:-a3-ultra}"
RECIPE=values/examples/a3ultra-405b.yaml
echo "== helm nemo validate --values $RECIPE"
"$HELM" nemo validate --values "$RECIPE"
echo "== helm nemo template --values $RECIPE -n ml-team"
OUT="$HOME_DIR/manifest.yaml"
"$HELM" nemo template --values "$RECIPE" -n ml-team > "$OUT"
"$ROOT/.venv/bin/python" -m helm_nemo summary "$OUT"
echo "== a bad value is caught before helm gets any value (exit code 2):"
BAD="$HOME_DIR/bad.yaml"
sed 's/gpus: 432/gpus: 430/' "$RECIPE" > "$BAD"
cp -r values/examples/launchers "$HOME_DIR/"
set +e
"$HELM" nemo template --values "$BAD" >/dev/null
echo "exit code: $?"
