#!/usr/bin/env bash
# Builds the real control plane the cluster tests run (tests/cluster_fixture.py) from the Go module
# tests/cluster/ locks: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the JobSet and
# Kueue managers, kwok. One `go build` for all seven (they share most packages, so one compile cache),
# -trimpath and stripped, into a cache outside the work tree keyed by the module's lock:
#
#   ${HELM_NEMO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/helm-nemo/cluster}/<key>/bin/
#
# <key> is the sha256 of go.mod, go.sum, the etcd main and this script's build line, so a change of any
# version builds anew and an unchanged lock reuses the binaries (a second run does nothing). Prints the
# bin folder as its last line of stdout. Needs Go (go.mod's version) and the Go module proxy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODULE=tests/cluster
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler jobset kueue kwok)
PACKAGES=(./cmd/etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
          k8s.io/kubernetes/cmd/kube-scheduler sigs.k8s.io/jobset sigs.k8s.io/kueue/cmd/kueue sigs.k8s.io/kwok/cmd/kwok)

say() { echo "cluster: $*" >&2; }

# Go from PATH, else where the official archive installs it (a shell started with a bare PATH lacks it).
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  say "go is not on PATH: the cluster tests build their control plane with Go (see docs/testing.md)"
  exit 2
fi
# The versions go.mod names (the build stamps them, as each project's release build does).
version_of() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$MODULE/go.mod"; }
KUBE_VERSION=$(version_of k8s.io/kubernetes)
KUBE_MINOR=$(echo "$KUBE_VERSION" | cut -d. -f2)
LDFLAGS="-s -w \
 -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$KUBE_MINOR -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$KUBE_MINOR -X k8s.io/client-go/pkg/version.gitTreeState=clean \
 -X sigs.k8s.io/kueue/pkg/version.GitVersion=$(version_of sigs.k8s.io/kueue)"

KEY=$( { cat "$MODULE/go.mod" "$MODULE/go.sum" "$MODULE/cmd/etcd/main.go"; echo "$LDFLAGS ${PACKAGES[*]}"; go env GOVERSION; } \
       | sha256sum | cut -c1-16)
CACHE=${HELM_NEMO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/helm-nemo/cluster}
OUT=$CACHE/$KEY

if [[ -f $OUT/complete ]]; then
  echo "$OUT/bin"
  exit 0
fi

say "building ${BINARIES[*]} ($KUBE_VERSION) into $OUT (cold: tens of minutes on 2 cores; once per lock)"
rm -rf "$OUT.partial"
mkdir -p "$OUT.partial/bin"
start=$(date +%s)
(
  cd "$MODULE"
  # The lock is go.sum: -mod=readonly refuses to change it; GOTOOLCHAIN=local: the machine's Go, no download.
  GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags="$LDFLAGS" -o "$OUT.partial/bin/" "${PACKAGES[@]}"
)
for binary in "${BINARIES[@]}"; do
  [[ -x $OUT.partial/bin/$binary ]] || { say "go build made no $binary"; exit 1; }
done
seconds=$(( $(date +%s) - start ))
size=$(du -sm "$OUT.partial/bin" | cut -f1)
printf 'built in %ss with %s; %s MiB\n' "$seconds" "$(go env GOVERSION)" "$size" > "$OUT.partial/complete"
rm -rf "$OUT"
mv "$OUT.partial" "$OUT"
say "built in ${seconds}s, ${size} MiB: $OUT/bin"
echo "$OUT/bin"
