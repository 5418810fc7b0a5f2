#!/usr/bin/env bash
# Build the metric and log shippers the shipper captures run (tests/data/shippers/), from
# their Go modules, with the Go toolchain only (Go >= 1.25; the module proxy is the only
# download). Binaries go to $SHIPPERS_DIR (default: <repo>/.stack/shippers, gitignored):
#
#   telegraf            Telegraf v1.37.2, a custom build with only the plugins the captures use
#   otelcol-flinkwatch  an OpenTelemetry Collector v0.155.0 from scripts/shippers/otelcol-builder.yaml
#
#   scripts/build_shippers.sh [telegraf|otelcol]...   (default: both; each skipped if built)
#
# On the 2-core development machine (2026-11-24, shared with other builds and tests),
# downloads included: Telegraf 1 min 39 s; the Collector 12 min 36 s (`go build` 11 min 46 s).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${SHIPPERS_DIR:-$repo/.stack/shippers}
TELEGRAF_VERSION=v1.37.2
OTELCOL_VERSION=v0.155.0

say() { printf '[shippers] %s\n' "$*" >&2; }

telegraf() {
  if [ -x "$out/telegraf" ]; then say "telegraf: built ($out/telegraf)"; return; fi
  # Telegraf's custom builds: the tag "custom" drops every plugin, the others bring back
  # one each (docs/CUSTOMIZATION.md of the module). outputs.file is there for debugging.
  say "telegraf: go install github.com/influxdata/telegraf/cmd/telegraf@$TELEGRAF_VERSION"
  GOBIN=$out GOFLAGS=-mod=mod go install \
    -tags "custom,inputs.prometheus,outputs.kafka,outputs.file,serializers.json,serializers.influx" \
    "github.com/influxdata/telegraf/cmd/telegraf@$TELEGRAF_VERSION"
}

otelcol() {
  if [ -x "$out/otelcol-flinkwatch" ]; then say "otelcol: built ($out/otelcol-flinkwatch)"; return; fi
  GOBIN=$out go install "go.opentelemetry.io/collector/cmd/builder@$OTELCOL_VERSION"
  local src=$out/otelcol-build
  # The builder writes the sources and go.mod, then runs a strict `go mod tidy`, which
  # also wants the test dependencies of every component: here the proxy refuses one of
  # them (contrib's pkg/golden v0.155.0: 403) and the checksum database does not know
  # pkg/stanza v0.155.0 (404), so that step fails. (--skip-get-modules would not write
  # go.mod at all.) `go mod tidy -e` then resolves what the binary imports, nothing of
  # which is missing, and `go build` compiles it as the builder would have.
  rm -rf "$src"
  "$out/builder" --config "$repo/scripts/shippers/otelcol-builder.yaml" \
    --skip-compilation --output-path "$src" || [ -f "$src/go.mod" ]
  (
    cd "$src"
    export GOFLAGS=-mod=mod
    export GONOSUMDB=github.com/open-telemetry/opentelemetry-collector-contrib/pkg/stanza
    go mod tidy -e
    go build -trimpath -ldflags="-s -w" -o "$out/otelcol-flinkwatch" .
  )
  say "otelcol: $out/otelcol-flinkwatch"
}

mkdir -p "$out"
[ $# -gt 0 ] || set -- telegraf otelcol
for w in "$@"; do
  case $w in
    telegraf) telegraf ;;
    otelcol) otelcol ;;
    *) echo "usage: $0 [telegraf|otelcol]..." >&2; exit 2 ;;
  esac
done
