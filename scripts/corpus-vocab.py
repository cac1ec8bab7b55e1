#!/usr/bin/env python3
"""A WordPiece vocabulary of SIZE pieces for one corpus, cut from a larger one (docs/time-to-train.md).

Reads `bertbench tokenize --vocab_file=VOCAB` output (one {"tokens": [...]} per line) on stdin and writes
OUT: [PAD] [UNK] [CLS] [SEP] [MASK]; every character that occurs in the corpus, as a word-initial piece
and as a "##" continuation (so that every word of the corpus still tokenizes without [UNK]); then the
corpus's most frequent pieces of VOCAB until SIZE. A word whose pieces were cut is split by WordPiece's
greedy longest match into the pieces kept. Ties in frequency: first occurrence in the corpus first.

  cat data/brown/train-*.txt | build/bertbench tokenize --vocab_file=data/vocab.txt |
      /usr/bin/python3 scripts/corpus-vocab.py --vocab=data/vocab.txt --size=8192 --out=data/vocab-brown-8k.txt
"""
import argparse
import collections
import json
import os
import sys

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", required=True, help="the vocab.txt the tokens came from")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        with open(a.vocab, encoding="utf-8") as f:
            vocab = [l.rstrip("\n") for l in f]
    except OSError as e:
        sys.exit("corpus-vocab.py: --vocab=%s: %s" % (a.vocab, e.strerror))
    rank = {t: i for i, t in enumerate(vocab)}
    missing = [t for t in SPECIALS if t not in rank]
    if missing:
        sys.exit("corpus-vocab.py: --vocab=%s: no %s (expected a BERT vocab.txt)" % (a.vocab, ", ".join(missing)))
    counts = collections.Counter()
    for n, line in enumerate(sys.stdin, 1):
        try:
            counts.update(json.loads(line)["tokens"])
        except (ValueError, KeyError, TypeError):
            sys.exit("corpus-vocab.py: stdin line %d: expected bertbench tokenize's {\"tokens\": [...]} line" % n)
    unknown = [t for t in counts if t not in rank]
    if unknown:
        sys.exit("corpus-vocab.py: stdin: piece %r is not in --vocab=%s (tokenized with another vocab?)"
                 % (unknown[0], a.vocab))
    chars = {c for t in counts for c in (t[2:] if t.startswith("##") else t)}
    keep = SPECIALS + [t for t in vocab if (len(t) == 1 and t in chars) or
                       (len(t) == 3 and t.startswith("##") and t[2] in chars)]
    n_chars = len(keep) - len(SPECIALS)
    if a.size < len(keep):
        sys.exit("corpus-vocab.py: --size=%d: the corpus needs %d pieces for [PAD]..[MASK] and its characters alone"
                 % (a.size, len(keep)))
    kept = set(keep)
    for t, _ in counts.most_common():  # ties: the order of first occurrence in the corpus
        if len(keep) == a.size:
            break
        if t not in kept:
            keep.append(t)
            kept.add(t)
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in keep))
    os.replace(tmp, a.out)
    covered = sum(counts[t] for t in kept) / max(1, sum(counts.values()))
    print("corpus-vocab.py: %s: %d pieces (%d characters); %.1f%% of the corpus's pieces kept as they were"
          % (a.out, len(keep), n_chars, 100 * covered))


if __name__ == "__main__":
    main()
