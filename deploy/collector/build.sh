#!/usr/bin/env bash
# Build tracescore's minimal OpenTelemetry Collector (otelcol-tracescore) with the OpenTelemetry
# Collector Builder (ocb), from the manifest next to this script (builder-config.yaml).
#
#   deploy/collector/build.sh            # prints the binary's path as its last line
#   "$(deploy/collector/build.sh | tail -n1)" validate --config collectors/otlp-to-kafka.yaml
#
# Everything lives outside the repository, under
#   ${TRACESCORE_CACHE_DIR:-$HOME/.cache/tracescore}/otelcol/<version>/
#     bin/builder              the ocb binary
#     gopath/ gomodcache/ gocache/   Go's caches, private to this build
#     dist-<manifest hash>/    the generated sources and the binary
# A warm run (the binary for this manifest exists) prints its path and exits at once. Editing the
# manifest (anything but comments) builds a new binary next to the old one.
#
# Needs Go (the 0.158.0 components require go >= 1.25.0) and access to the Go module proxy.
# The build runs under `nice`/`ionice`: the machine is shared.
set -euo pipefail

OTELCOL_VERSION="0.158.0"
BINARY_NAME="otelcol-tracescore"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
manifest="$here/builder-config.yaml"
root="${TRACESCORE_CACHE_DIR:-$HOME/.cache/tracescore}/otelcol/$OTELCOL_VERSION"

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ -f $manifest ]] || die "manifest not found: $manifest"

# The binary is keyed by the manifest's content without comments.
manifest_hash="$(grep -v '^[[:space:]]*#' "$manifest" | sha256sum | cut -c1-12)"
dist="$root/dist-$manifest_hash"
binary="$dist/$BINARY_NAME/$BINARY_NAME"

if [[ -x $binary ]]; then
	echo "$binary"
	exit 0
fi

command -v go >/dev/null 2>&1 || die "Go is not installed (https://go.dev/dl/); it is needed to build the Collector"

# Every v0.x component must have the builder's version; mixing releases fails late and obscurely.
mismatched="$(grep -E '^[[:space:]]*-?[[:space:]]*gomod:' "$manifest" | grep -E ' v0\.' | grep -v " v$OTELCOL_VERSION\$" || true)"
[[ -z $mismatched ]] || die "components in $manifest not at v$OTELCOL_VERSION:"$'\n'"$mismatched"

mkdir -p "$root"
export GOPATH="$root/gopath"
export GOMODCACHE="$root/gomodcache"
export GOCACHE="$root/gocache"
export GOBIN="$root/bin"
# Writable module cache, so `rm -rf` of the cache directory just works.
export GOFLAGS="-modcacherw ${GOFLAGS:-}"

low_priority=(nice -n 19)
if command -v ionice >/dev/null 2>&1; then
	low_priority+=(ionice -c 3)
fi

# One build at a time per version (tests and people may start this concurrently).
exec 9>"$root/.build.lock"
flock 9
if [[ -x $binary ]]; then
	echo "$binary"
	exit 0
fi

started=$SECONDS

builder="$GOBIN/builder"
if [[ ! -x $builder ]]; then
	log "installing the OpenTelemetry Collector Builder v$OTELCOL_VERSION"
	"${low_priority[@]}" go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_VERSION" >&2
fi
builder_version="$("$builder" version 2>&1 || true)"
[[ $builder_version == *"$OTELCOL_VERSION"* ]] || die "unexpected builder version: $builder_version"

# Build in a scratch directory and move it into place only when the binary exists, so an interrupted
# build never looks finished.
work="$root/work-$manifest_hash.$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cp "$manifest" "$work/builder-config.yaml"

log "building $BINARY_NAME $OTELCOL_VERSION (cold builds take several minutes)"
(cd "$work" && "${low_priority[@]}" "$builder" --config builder-config.yaml) >&2 ||
	die "the Collector build failed (see the builder output above)"

[[ -x "$work/$BINARY_NAME/$BINARY_NAME" ]] || die "the builder finished but $BINARY_NAME is missing"
rm -rf "$dist"
mv "$work" "$dist"
trap - EXIT

log "built in $((SECONDS - started))s"
echo "$binary"
