#!/usr/bin/env bash
# Installs the Debian packages titan.c builds and tests with (no-op when present); chromium renders
# the report page for tests/test_report_render.c, which CI must not skip.
set -euo pipefail
PKGS="build-essential cmake clang libomp-14-dev libclang-rt-14-dev libcjson-dev libopenblas-openmp-dev libpcre2-dev libutf8proc-dev zlib1g-dev libopenmpi-dev openmpi-bin chromium python3 python3-venv"
missing=""
for p in $PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
