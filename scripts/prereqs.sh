#!/usr/bin/env bash
# What `make setup` needs from the machine, checked before anything is installed: a first
# run must not download a gigabyte of Python packages to then find Java missing. Every
# missing prerequisite is named at once, each with the command that installs it (Debian).
#
#   scripts/prereqs.sh    exit 0 when all are there; else one line each, and exit 1
#
# Environment (all optional):
#   PYTHON   the interpreter the venv is made from   (default: python3)
#
# Java's version is read from its JDK's `release` file, so no JVM starts for the check;
# `java -version` only when there is no such file.
set -euo pipefail

python=${PYTHON:-python3}
missing=0

say() { printf '[prereqs] %s\n' "$*" >&2; }

lack() {  # lack WHAT FIX
  say "missing: $1; fix: $2"
  missing=$((missing + 1))
}

check_python() {
  if ! command -v "$python" >/dev/null; then
    lack "Python 3.11 or later ($python not found)" \
      "apt-get install python3 python3-venv (Debian 12 has 3.11), or make PYTHON=/path/to/python3.11"
    return
  fi
  local version
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || version=unknown
  local major=${version%%.*} minor=${version#*.}
  if [ "$version" = unknown ] || [ "$major" -lt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -lt 11 ]; }; then
    lack "Python 3.11 or later ($python is $version)" \
      "apt-get install python3 (Debian 12 has 3.11), or make PYTHON=/path/to/python3.11"
    return
  fi
  # Debian ships venv's pip bootstrap apart: without it `python3 -m venv` leaves a venv
  # with no pip in it.
  if ! "$python" -m ensurepip --version >/dev/null 2>&1; then
    lack "Python's venv with ensurepip ($python -m ensurepip does not run)" "apt-get install python3-venv"
  fi
}

java_major() {  # the major version of the `java` on PATH, from its release file
  local home line version
  home=$(readlink -f "$(command -v java)")
  home=${home%/bin/java}
  version=
  if [ -f "$home/release" ]; then
    while IFS= read -r line; do
      case $line in JAVA_VERSION=*) version=${line#JAVA_VERSION=} ;; esac
    done < "$home/release"
  fi
  if [ -z "$version" ]; then  # no release file: ask the JVM (prints to stderr)
    version=$(java -version 2>&1) || true
    version=${version#*version }
  fi
  version=${version//\"/}
  version=${version%%[!0-9.]*}
  case $version in 1.*) version=${version#1.} ;; esac  # Java 8 and older: 1.8.0_...
  echo "${version%%.*}"
}

check_java() {
  if ! command -v java >/dev/null; then
    lack "Java 17 or later (java not found)" "apt-get install openjdk-17-jdk-headless"
    return
  fi
  local major
  major=$(java_major)
  if ! [[ $major =~ ^[0-9]+$ ]] || [ "$major" -lt 17 ]; then
    lack "Java 17 or later (java is ${major:-of unknown version})" \
      "apt-get install openjdk-17-jdk-headless, and put it first on PATH"
  fi
}

check_maven() {
  command -v mvn >/dev/null || lack "Maven (mvn not found)" "apt-get install maven"
}

# flinkwatch compiles one small class of its own (streaming/jvm): a JDK, not only a JRE.
check_javac() {
  command -v java >/dev/null || return 0  # said above
  command -v javac >/dev/null && command -v jar >/dev/null ||
    lack "a JDK's javac and jar (only a Java runtime found)" "apt-get install openjdk-17-jdk-headless"
}

check_python
check_java
check_javac
check_maven
if [ "$missing" -gt 0 ]; then
  say "$missing prerequisite(s) missing: install them, then run make again"
  exit 1
fi
