#!/usr/bin/env bash
# A Prometheus server and an Alertmanager for integration tests and the benchmark: Debian's
# `prometheus` (2.42 on bookworm) and `prometheus-alertmanager` (0.25) packages, downloaded
# with apt and unpacked with dpkg-deb. Nothing is installed on the system and no service is
# started; tests and the benchmark run the binaries themselves (tests/promserver.py).
#
#   scripts/prometheus.sh fetch   put prometheus, promtool and alertmanager in $FLINKWATCH_STACK_DIR/prometheus/bin
#                                 (cached, idempotent; runs `apt-get update` once if root and needed)
#   scripts/prometheus.sh path    print the binary's path (exit 1 if it has not been fetched)
#
# Environment (all optional):
#   FLINKWATCH_STACK_DIR   where the binary is kept   (default: <repo>/.stack)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
stack=${FLINKWATCH_STACK_DIR:-$repo/.stack}
dest=$stack/prometheus
binary=$dest/bin/prometheus
work=

say() { printf '[prometheus] %s\n' "$*" >&2; }

cleanup() { if [ -n "$work" ]; then rm -rf "$work"; fi; }

version() {  # first line of `prometheus --version` (read whole, so no SIGPIPE under pipefail)
  local out
  out=$("$binary" --version 2>&1)
  echo "${out%%$'\n'*}"
}

need() {  # need COMMAND...
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null || { say "$cmd not found: this needs a Debian/Ubuntu machine with apt"; exit 1; }
  done
}

download() {  # download DIR: apt-get download the packages into DIR
  local dir=$1
  # As root, apt drops privileges to _apt for downloads; let it reach and write into DIR
  # (otherwise it warns and downloads unsandboxed).
  if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
    chmod 755 "$(dirname "$dir")" && chown _apt "$dir"
  fi
  (cd "$dir" && apt-get download -q prometheus prometheus-alertmanager >&2)
}

download_with_update() {  # download_with_update DIR: retry once after `apt-get update` (root only)
  local dir=$1
  download "$dir" && return
  if [ "$(id -u)" != 0 ]; then
    say "apt-get download failed; if the package lists are missing, run 'apt-get update' as root"
    exit 1
  fi
  say "apt-get download failed; running 'apt-get update' once and retrying"
  apt-get update -q >&2
  download "$dir" || { say "apt-get download failed after apt-get update"; exit 1; }
}

fetch() {
  if [ -f "$dest/.complete" ] && [ -x "$binary" ] && [ -x "$dest/bin/alertmanager" ]; then
    say "cached: $binary"
    templates
    version
    return
  fi
  need apt-get dpkg-deb
  work=$(mktemp -d)
  trap cleanup EXIT
  mkdir -p "$work/deb" "$work/root"
  say "downloading Debian packages 'prometheus' and 'prometheus-alertmanager' with apt-get download (first run only)..."
  local start end deb
  start=$(date +%s.%N)
  download_with_update "$work/deb"
  end=$(date +%s.%N)
  for deb in "$work"/deb/*.deb; do
    say "downloaded $(basename "$deb") ($(du -h "$deb" | cut -f1))"
    dpkg-deb -x "$deb" "$work/root"
  done
  say "downloads took $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
  for b in prometheus prometheus-alertmanager; do
    [ -x "$work/root/usr/bin/$b" ] || { say "usr/bin/$b not found in the packages"; exit 1; }
  done
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/bin"
  for b in prometheus promtool amtool; do
    if [ -x "$work/root/usr/bin/$b" ]; then cp "$work/root/usr/bin/$b" "$dest.tmp/bin/"; fi
  done
  # Debian renames the binary; the upstream name is what the docs and tests use.
  cp "$work/root/usr/bin/prometheus-alertmanager" "$dest.tmp/bin/alertmanager"
  mkdir -p "$dest.tmp/share" && cp -r "$work/root/usr/share/prometheus/alertmanager" "$dest.tmp/share/"
  templates
  touch "$dest.tmp/.complete"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  say "installed $(ls "$dest/bin" | tr '\n' ' ')in $dest/bin"
  version
}

templates() {  # Debian's Alertmanager reads its notification templates from this fixed path
  local src=$dest.tmp/share/alertmanager tpl=/usr/share/prometheus/alertmanager
  [ -d "$src" ] || src=$dest/share/alertmanager
  if [ -f "$tpl/default.tmpl" ]; then return; fi
  if mkdir -p "$tpl" 2>/dev/null && cp "$src"/*.tmpl "$tpl"/; then
    say "installed Alertmanager's templates in $tpl (its Debian build reads them there)"
  else
    say "cannot write $tpl: Alertmanager will not start; copy $src/*.tmpl there as root"
  fi
}

path() {
  echo "$binary"
  [ -x "$binary" ] || { say "not fetched yet: run $0 fetch"; return 1; }
}

case "${1:-}" in
  fetch) fetch ;;
  path) path ;;
  *) echo "usage: $0 fetch|path" >&2; exit 2 ;;
esac
