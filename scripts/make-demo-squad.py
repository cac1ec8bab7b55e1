#!/usr/bin/python3
"""Makes the SQuAD-v1.1-format set of `make demo-squad` from the Brown corpus text of get-data.sh.

This is NOT SQuAD and has no human-written questions: it is a synthetic span-extraction task made
mechanically from the Brown corpus, simple enough that BERT-tiny (pretrained by `make demo` for a
few minutes) learns it in a few minutes of fine-tuning on a CPU.

  context  = consecutive sentences of one Brown document (--min_words..--max_words words, joined
             by single spaces; the corpus is already tokenised, so punctuation is space-separated)
  answer   = 1-3 consecutive words of the context (each with a letter or digit, not only an article)
  question, --style=locate (the default): "where is <answer> ?"
             The model has to find the quoted words in the context and return exactly that span:
             matching question tokens to context tokens and marking where the match starts and
             ends. It tests the fine-tuning machinery (span head, loss, decoding, metric), not
             reading comprehension: a system that copied the question would score 100.
  question, --style=follows: "what word follows <anchor> ?" ("what two/three words follow ...")
             where <anchor> is the word just before the answer and occurs once in the context. It
             needs attention to the previous token (an induction step); BERT-tiny learns it far
             more slowly than `locate`, too slowly for the demo's few minutes.
  e.g. context "... The Dreadnought was built on designs supplied by the United States in 1959 ..."
       locate : "where is by the United ?"      -> "by the United"
       follows: "what three words follow supplied ?" -> "by the United"

train-v1.1.json comes from the training documents (BROWN_DIR/train-*.txt), dev-v1.1.json from the
held-out documents (BROWN_DIR/eval.txt, the documents the pretraining demo evaluates on), so the two
sets share no document. The output is a deterministic function of the input text and the options
(random.Random seeded by --seed and the set's name, sorted input files); files are written
atomically.

Usage: make-demo-squad.py BROWN_DIR OUTPUT_DIR [--style=locate|follows] [--train_questions=N]
           [--dev_questions=N] [--questions_per_paragraph=N] [--min_words=N] [--max_words=N] [--seed=N]
"""
import argparse
import glob
import json
import os
import random
import re
import string
import sys
import tempfile

MIN_WORDS, MAX_WORDS = 20, 40  # default words per context (~25-60 WordPieces: one 80-token window)
ANSWER_LENGTHS = (1, 1, 2, 3)  # answer length in words, drawn uniformly from this tuple
# --style=follows: the question names the word just before the answer and the answer's length.
FOLLOWS = {1: "what word follows {anchor} ?", 2: "what two words follow {anchor} ?",
           3: "what three words follow {anchor} ?"}
TEMPLATE = {"what", "word", "words", "follow", "follows", "two", "three", "where", "is", "?"}
# --style=locate: the question quotes the answer; the model has to find it in the context.
LOCATE = "where is {answer} ?"
ARTICLES = {"a", "an", "the"}


def fail(msg):
    print(f"make-demo-squad: {msg}", file=sys.stderr)
    sys.exit(1)


def read_documents(path):
    """Documents of a get-data.sh text file: one sentence per line, blank line between documents.
    Each document is a list of sentences, each a list of words (split on whitespace)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read it as UTF-8 text: {e}")
    docs = []
    for block in re.split(r"\n\s*\n", text):
        sentences = [line.split() for line in block.split("\n")]
        sentences = [s for s in sentences if s]
        if sentences:
            docs.append(sentences)
    return docs


def paragraphs_of(doc, min_words, max_words):
    """Consecutive sentences grouped greedily into contexts of min_words..max_words words; a sentence
    longer than max_words ends the current group and is left out."""
    out, cur = [], []
    for s in doc:
        if len(s) > max_words:
            cur = []
            continue
        if len(cur) + len(s) > max_words:
            cur = []
        cur = cur + s
        if len(cur) >= min_words:
            out.append(cur)
            cur = []
    return out


def is_content(word):
    return any(c.isalnum() for c in word)


def normalize(text):
    """evaluate-v1.1.py's normalize_answer (lower, no ASCII punctuation, no articles, one space)."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def questions_for(words, rng, count, qid_prefix, style):
    """Up to `count` questions on one context (answers do not overlap)."""
    lower = [w.lower() for w in words]
    word_counts = {}
    for w in lower:
        word_counts[w] = word_counts.get(w, 0) + 1
    # char offset of each word in " ".join(words)
    offsets, pos = [], 0
    for w in words:
        offsets.append(pos)
        pos += len(w) + 1
    starts = list(range(1, len(words)))
    rng.shuffle(starts)
    used = [False] * len(words)
    qas = []
    for i in starts:
        if len(qas) == count:
            break
        n = rng.choice(ANSWER_LENGTHS)
        end = i + n  # exclusive
        if end > len(words) or any(used[i - 1:end]):
            continue
        anchor, answer = words[i - 1], words[i:end]
        if not all(is_content(w) for w in answer) or not normalize(" ".join(answer)):
            continue
        # The anchor: a word with a letter, not a question-template word, once in the context.
        if not any(c.isalpha() for c in anchor) or lower[i - 1] in TEMPLATE or word_counts[lower[i - 1]] != 1:
            continue
        for j in range(i - 1, end):
            used[j] = True
        qas.append({
            "id": f"{qid_prefix}-{len(qas)}",
            "question": (FOLLOWS[n].format(anchor=anchor) if style == "follows"
                         else LOCATE.format(answer=" ".join(answer))),
            "answers": [{"text": " ".join(answer), "answer_start": offsets[i]}],
        })
    return qas


def make_set(docs, name, max_questions, per_paragraph, rng, min_words, max_words, style):
    """SQuAD v1.1 JSON object: paragraphs drawn at random (rng) from all documents until
    max_questions questions; articles and paragraphs keep the corpus order."""
    paragraphs = [paragraphs_of(doc, min_words, max_words) for doc in docs]
    candidates = [(d, p) for d in range(len(docs)) for p in range(len(paragraphs[d]))]
    rng.shuffle(candidates)
    chosen, total = {}, 0
    for d, p in candidates:
        if total >= max_questions:
            break
        words = paragraphs[d][p]
        qas = questions_for(words, rng, min(per_paragraph, max_questions - total), f"{name}-{d:03d}-{p:03d}",
                            style)
        if qas:
            chosen[(d, p)] = {"context": " ".join(words), "qas": qas}
            total += len(qas)
    data = []
    for d in range(len(docs)):
        paras = [chosen[(d, p)] for p in range(len(paragraphs[d])) if (d, p) in chosen]
        if paras:
            data.append({"title": f"brown-{name}-{d:03d}", "paragraphs": paras})
    return {"version": "1.1", "data": data}, total


def write_atomic(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("brown_dir", help="get-data.sh's Brown text: train-*.txt and eval.txt")
    ap.add_argument("output_dir", help="writes train-v1.1.json and dev-v1.1.json here")
    ap.add_argument("--train_questions", type=int, default=8000)
    ap.add_argument("--dev_questions", type=int, default=500)
    ap.add_argument("--questions_per_paragraph", type=int, default=2)
    ap.add_argument("--min_words", type=int, default=MIN_WORDS, help="shortest context, in words")
    ap.add_argument("--max_words", type=int, default=MAX_WORDS, help="longest context, in words")
    ap.add_argument("--style", choices=("locate", "follows"), default="locate",
                    help="locate: 'where is <answer> ?'; follows: 'what word follows <anchor> ?'")
    ap.add_argument("--seed", type=int, default=12345)
    a = ap.parse_args()
    if a.max_words < a.min_words or a.min_words < 2:
        fail(f"--min_words={a.min_words} --max_words={a.max_words}: expected 2 <= min_words <= max_words")
    for flag in ("train_questions", "dev_questions", "questions_per_paragraph"):
        if getattr(a, flag) < 1:
            fail(f"--{flag}={getattr(a, flag)}: expected a positive number")
    train_files = sorted(glob.glob(os.path.join(a.brown_dir, "train-*.txt")))
    eval_file = os.path.join(a.brown_dir, "eval.txt")
    if not train_files or not os.path.isfile(eval_file):
        fail(f"{a.brown_dir}: expected train-*.txt and eval.txt (hint: scripts/get-data.sh makes them)")
    train_docs = [doc for f in train_files for doc in read_documents(f)]
    dev_docs = read_documents(eval_file)
    os.makedirs(a.output_dir, exist_ok=True)
    for name, docs, limit in (("train", train_docs, a.train_questions), ("dev", dev_docs, a.dev_questions)):
        rng = random.Random(f"{a.seed}-{name}")
        obj, total = make_set(docs, name, limit, a.questions_per_paragraph, rng, a.min_words, a.max_words,
                              a.style)
        if total == 0:
            fail(f"{a.brown_dir}: no {name} question could be made (documents too short: a context "
                 f"needs {a.min_words}-{a.max_words} words)")
        path = os.path.join(a.output_dir, f"{name}-v1.1.json")
        write_atomic(path, obj)
        n_par = sum(len(x["paragraphs"]) for x in obj["data"])
        print(f"make-demo-squad: {path}: {total} questions on {n_par} contexts from {len(obj['data'])} "
              f"of {len(docs)} documents")


if __name__ == "__main__":
    main()
