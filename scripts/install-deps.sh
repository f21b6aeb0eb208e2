#!/usr/bin/env bash
# Installs the Debian packages ETH builds against, only those missing, and any packages named as
# arguments (scripts/evaluate.sh adds what it draws with). Safe to run repeatedly.
set -euo pipefail
# clang, libclang-rt-dev (libFuzzer) and libomp-dev: the fuzz targets (fuzz/, scripts/fuzz.sh);
# lld: the faster linker cmake/linker.cmake picks where it is installed.
packages=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev
          libgmock-dev libdnnl-dev libopenblas-dev openmpi-bin libopenmpi-dev python3
          clang libclang-rt-dev libomp-dev lld
          iproute2 jq "$@")  # ip netns, tc, jq: scripts/netns-hosts.sh (multi-host tests)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "eth: installing missing Debian packages: ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
