#!/usr/bin/env bash
# The project's virtual environment, made or mended before pip installs into it.
#
#   scripts/venv.sh check DIR    exit 0 when DIR is a venv whose pip runs; else say why, exit 1
#   scripts/venv.sh ensure DIR   make DIR a venv whose pip runs: create it, or rebuild it
#
# A venv made while Debian's python3-venv was missing has bin/python but no pip; every
# later `pip install` then fails with "No module named pip" and nothing rebuilt it.
# `ensure` rebuilds such a venv (one line says so), and removes one it could not make, so
# the next run starts clean instead of from a half-made venv.
#
# Environment (all optional):
#   PYTHON   the interpreter the venv is made from   (default: python3)
set -euo pipefail

python=${PYTHON:-python3}

say() { printf '[setup] %s\n' "$*" >&2; }

check() {  # check DIR: quiet when fine
  local dir=$1
  if [ ! -x "$dir/bin/python" ]; then
    say "$dir: no venv (no $dir/bin/python)"
    return 1
  fi
  if ! "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
    say "$dir: its pip does not run (made while python3-venv was missing?)"
    return 1
  fi
}

create() {  # create DIR
  local dir=$1
  if ! "$python" -m venv --clear "$dir"; then
    rm -rf "$dir"
    say "$python -m venv $dir failed; on Debian: apt-get install python3-venv (scripts/prereqs.sh checks)"
    exit 1
  fi
  check "$dir" || { rm -rf "$dir"; say "the new venv $dir has no working pip either"; exit 1; }
}

ensure() {  # ensure DIR
  local dir=$1
  if [ ! -e "$dir" ]; then
    create "$dir"
  elif ! check "$dir" 2>/dev/null; then
    say "$dir is a half-made venv (its pip does not run): rebuilding it"
    rm -rf "$dir"
    create "$dir"
  fi
}

case "${1:-}" in
  check) check "${2:?usage: $0 check DIR}" ;;
  ensure) ensure "${2:?usage: $0 ensure DIR}" ;;
  *) echo "usage: $0 check|ensure DIR" >&2; exit 2 ;;
esac
