#!/usr/bin/env bash
# Fetch what tests/deploy needs to validate the deployment files, through the Go module proxy only:
#   kubeconform           github.com/yannh/kubeconform (Kubernetes manifest validator)
#   the compose schema    compose-spec.json inside github.com/compose-spec/compose-go/v2
#   the KEDA CRDs         config/crd/bases inside github.com/kedacore/keda/v2
# Prints three lines: the kubeconform binary, the compose-spec.json path, the KEDA CRD directory.
# Cached under ${TRACESCORE_CACHE_DIR:-$HOME/.cache/tracescore}/deploy-tools/; one fetch at a time (flock).
set -euo pipefail

KUBECONFORM_VERSION="v0.7.0"
COMPOSE_GO_VERSION="v2.16.2"
KEDA_VERSION="v2.21.0"

root="${TRACESCORE_CACHE_DIR:-$HOME/.cache/tracescore}/deploy-tools"
mkdir -p "$root"
# Go's module cache is keyed by module and version itself; the binary directory by kubeconform's version.
export GOPATH="$root/gopath" GOMODCACHE="$root/gomodcache" GOCACHE="$root/gocache"
export GOBIN="$root/kubeconform-$KUBECONFORM_VERSION/bin"
export GOFLAGS="-modcacherw" GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"

command -v go >/dev/null 2>&1 || { echo "tools.sh: Go is not installed (needed for kubeconform)" >&2; exit 1; }

exec 9>"$root/.lock"
flock 9

if [[ ! -x $GOBIN/kubeconform ]]; then
	echo "tools.sh: installing kubeconform $KUBECONFORM_VERSION" >&2
	nice -n 19 go install "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" >&2
fi
module_dir() { # the extracted module directory, downloaded through the proxy on first use
	go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}
compose_dir="$(module_dir github.com/compose-spec/compose-go/v2 "$COMPOSE_GO_VERSION")"
keda_dir="$(module_dir github.com/kedacore/keda/v2 "$KEDA_VERSION")"
[[ -f $compose_dir/schema/compose-spec.json ]] || { echo "tools.sh: no compose-spec.json in $compose_dir" >&2; exit 1; }
[[ -d $keda_dir/config/crd/bases ]] || { echo "tools.sh: no KEDA CRDs in $keda_dir" >&2; exit 1; }
echo "$GOBIN/kubeconform"
echo "$compose_dir/schema/compose-spec.json"
echo "$keda_dir/config/crd/bases"
