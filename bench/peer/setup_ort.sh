#!/usr/bin/env bash
# Installs the ONNX Runtime peer's node package, version pinned, into a cache OUTSIDE the repo:
#   ${BB_ORT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/bertbench/ort-<version>}/node_modules/onnxruntime-node
# Idempotent: a complete install (package.json of the pinned version and the CPU library for this
# platform present) is left alone. `--ignore-scripts`: the package's install script only fetches
# optional CUDA binaries from a host outside the npm registry; the CPU library ships in the package.
# Prints the install directory on stdout (the last line); exits non-zero with a one-line reason.
# Called by scripts/bench-compare.py when the `ort` peer is selected; not part of `make test`/CI.
set -euo pipefail

ORT_VERSION=1.30.0
DIR="${BB_ORT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/bertbench/ort-$ORT_VERSION}"
PKG="$DIR/node_modules/onnxruntime-node"

die() { echo "setup_ort.sh: $*" >&2; exit 1; }

installed() {
  [ -f "$PKG/package.json" ] || return 1
  local v
  v=$(node -p "require('$PKG/package.json').version" 2>/dev/null) || return 1
  [ "$v" = "$ORT_VERSION" ] || return 1
  ls "$PKG"/bin/napi-v*/linux/x64/libonnxruntime.so* >/dev/null 2>&1
}

command -v node >/dev/null || die "node not found on PATH (expected: node 20; hint: apt-get install nodejs npm)"
command -v npm >/dev/null || die "npm not found on PATH (hint: apt-get install npm)"

if installed; then
  echo "$DIR"
  exit 0
fi

mkdir -p "$DIR" || die "cannot create $DIR"
# A private package.json so npm installs here and never walks up into another project.
if [ ! -f "$DIR/package.json" ]; then
  echo '{"name": "bertbench-ort-peer", "private": true, "description": "bertbench ORT peer (bench/peer/setup_ort.sh)"}' \
    > "$DIR/package.json"
fi
echo "setup_ort.sh: installing onnxruntime-node@$ORT_VERSION into $DIR (npm install --ignore-scripts)" >&2
if ! (cd "$DIR" && npm install --ignore-scripts --no-audit --no-fund --save-exact \
        "onnxruntime-node@$ORT_VERSION" >"$DIR/npm-install.log" 2>&1); then
  tail -5 "$DIR/npm-install.log" >&2 || true
  die "npm install onnxruntime-node@$ORT_VERSION failed (full log: $DIR/npm-install.log); is the npm registry reachable? (npm config get registry: $(npm config get registry 2>/dev/null))"
fi
installed || die "onnxruntime-node@$ORT_VERSION installed into $DIR but its CPU library for linux/x64 (bin/napi-v*/linux/x64/libonnxruntime.so*) is missing"
# The package loads: a real check, not just files on disk.
(cd "$DIR" && node -e "const o = require('onnxruntime-node'); if (!o.InferenceSession) process.exit(1)") \
  || die "onnxruntime-node@$ORT_VERSION in $DIR does not load in node $(node --version)"
echo "$DIR"
