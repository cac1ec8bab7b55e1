#!/usr/bin/python3
"""Writes google_wwm_public_128_s12345_d1.txt: what google-research/bert's own
create_pretraining_data.py makes of ../shared/golden/corpus_public.txt with --do_whole_word_mask=True
(--max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345
--dupe_factor=1, uncased), one line per instance in output order: the FNV-1a 64 hash (hex) of

    "<input ids>;<masked_lm_positions>;<masked_lm_ids>;<next_sentence_label>"

(comma-joined decimals: the real tokens' ids, the real predictions), which
tests/data/pretraining_data_test.cpp recomputes from `bertbench prepare`'s records.

The script runs unmodified; TensorFlow is not needed: a stand-in module gives it tf.flags, tf.logging
and tf.gfile with TF's line reading (BufferedInputStream::ReadLine splits at '\\n' only and drops
every '\\r', as ../shared/golden/README.md's stand-in does), and create_training_instances is called
as its main() calls it. Usage (a google-research/bert checkout at GOOGLE_BERT):

    tests/reference/make_google_wwm.py GOOGLE_BERT ../shared/golden > tests/reference/google_wwm_public_128_s12345_d1.txt
"""
import glob
import os
import random
import sys
import tempfile
import types


def tensorflow_stand_in():
    flags_ns = types.SimpleNamespace()

    def define(name, default, *_args, **_kw):
        setattr(flags_ns, name, default)

    class GFile:
        def __init__(self, path, mode="r"):
            self.f = open(path, mode, encoding="utf-8", newline="\n")

        def readline(self):
            return self.f.readline().replace("\r", "")

        def __enter__(self):
            return self

        def __exit__(self, *_):
            self.f.close()

    tf = types.ModuleType("tensorflow")
    tf.flags = types.SimpleNamespace(FLAGS=flags_ns, DEFINE_string=define, DEFINE_bool=define,
                                     DEFINE_boolean=define, DEFINE_integer=define, DEFINE_float=define)
    tf.logging = types.SimpleNamespace(INFO=0, info=lambda *a, **k: None, set_verbosity=lambda *a: None)
    tf.gfile = types.SimpleNamespace(GFile=GFile, Glob=glob.glob)
    tf.app = types.SimpleNamespace(run=lambda *a, **k: None)
    return tf


def fnv1a64(text):
    h = 0xcbf29ce484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001b3) & 0xffffffffffffffff
    return "%016x" % h


def main(google_bert, golden):
    sys.modules["tensorflow"] = tensorflow_stand_in()
    sys.path.insert(0, google_bert)
    import create_pretraining_data as cpd  # noqa: E402  google's, unmodified
    import tokenization  # noqa: E402
    cpd.FLAGS.do_whole_word_mask = True
    tokenizer = tokenization.FullTokenizer(vocab_file=os.path.join(golden, "vocab.txt"), do_lower_case=True)
    instances = cpd.create_training_instances([os.path.join(golden, "corpus_public.txt")], tokenizer, 128, 1,
                                              0.1, 0.15, 20, random.Random(12345))
    for i in instances:
        ids = ",".join(str(x) for x in tokenizer.convert_tokens_to_ids(i.tokens))
        pos = ",".join(str(x) for x in i.masked_lm_positions)
        lab = ",".join(str(x) for x in tokenizer.convert_tokens_to_ids(i.masked_lm_labels))
        print(fnv1a64("%s;%s;%s;%d" % (ids, pos, lab, 1 if i.is_random_next else 0)))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
