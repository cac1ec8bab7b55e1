// Golden outputs of HuggingFace's Rust `tokenizers` (the library behind transformers'
// BertTokenizerFast) for bertbench's `squad --transformers_qa` tests (tests/data/
// fast_tokenizer_test.cpp). Not run by the tests: its outputs are committed next to it.
//
//   npm install --prefix /tmp/hf-tok tokenizers@0.13.3 tokenizers-linux-x64-gnu@0.13.4-rc2
//   NODE_PATH=/tmp/hf-tok/node_modules node tests/reference/hf_fast_tokenizer_golden.js \
//       ../shared/golden > tests/reference/hf_fast_tokenizer_golden.jsonl
//
// The tokenizer is BertTokenizerFast's as transformers' BertConverter builds it from vocab.txt
// (BertNormalizer, BertPreTokenizer, WordPiece with 100 characters, TemplateProcessing for
// [CLS] A [SEP] B [SEP], the five special tokens as non-normalized added tokens), loaded from its
// tokenizer.json form. Each output line is one JSON object:
//   {"kind":"text", "lower":b, "id":n, "ids":[...], "offsets":[[s,e],...]}   (no special tokens)
//   {"kind":"random", "lower":b, "text":"...", "ids":[...], "offsets":[[s,e],...]}
//     (texts drawn from a hostile alphabet by a seeded generator: accents, combining marks,
//     CJK, Hangul, controls, format characters, odd spaces, punctuation, emoji, special tokens)
//   {"kind":"context", "file":..., "lower":b, "context":c, "ids":[...], "offsets":[s0,e0,...]}
//     (the c-th distinct context of the file in question order: its tokens without special tokens)
//   {"kind":"features", "file":..., "lower":b, "question":k, "question_ids":[...], "context":c,
//    "windows":{"<max_length>/<stride>": [[begin,end), ...] or "<error message>", ...}}
//     (the question lstripped; each window checked by this script to be [CLS] question [SEP]
//     context[begin:end] [SEP] [PAD]...: see features())
// as run_qa.py's prepare_validation_features calls it: question.lstrip(), truncation
// "only_second", return_overflowing_tokens, return_offsets_mapping, padding "max_length".
// Offsets count Unicode code points (Python str indices), as transformers returns them.
'use strict';
const fs = require('fs');
const path = require('path');
const {Tokenizer} = require('tokenizers');

function bertTokenizer(vocabPath, lower) {
  const lines = fs.readFileSync(vocabPath, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const vocab = Object.create(null);  // as transformers' load_vocab: a repeated token's last line
  lines.forEach((t, i) => { vocab[t] = i; });
  const specials = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const sp = (id, type_id) => ({SpecialToken: {id, type_id}});
  const seq = (id, type_id) => ({Sequence: {id, type_id}});
  const tok = {
    version: '1.0', truncation: null, padding: null,
    added_tokens: specials.map(t => ({id: vocab[t], content: t, single_word: false, lstrip: false,
                                      rstrip: false, normalized: false, special: true})),
    normalizer: {type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true,
                 strip_accents: null, lowercase: lower},
    pre_tokenizer: {type: 'BertPreTokenizer'},
    post_processor: {
      type: 'TemplateProcessing',
      single: [sp('[CLS]', 0), seq('A', 0), sp('[SEP]', 0)],
      pair: [sp('[CLS]', 0), seq('A', 0), sp('[SEP]', 0), seq('B', 1), sp('[SEP]', 1)],
      special_tokens: {
        '[CLS]': {id: '[CLS]', ids: [vocab['[CLS]']], tokens: ['[CLS]']},
        '[SEP]': {id: '[SEP]', ids: [vocab['[SEP]']], tokens: ['[SEP]']},
      },
    },
    decoder: {type: 'WordPiece', prefix: '##', cleanup: true},
    model: {type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
            max_input_chars_per_word: 100, vocab},
  };
  return {tokenizer: Tokenizer.fromString(JSON.stringify(tok)), pad: vocab['[PAD]'],
          cls: vocab['[CLS]'], sep: vocab['[SEP]']};
}

// Python's str.isspace() characters: str.lstrip() with no argument.
const PY_SPACE = /^[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

function squadQuestions(file) {
  const doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  const out = [];
  for (const article of doc.data)
    for (const para of article.paragraphs)
      for (const qa of para.qas) out.push({question: qa.question, context: para.context});
  return out;
}

// The windows of one question at one max_length/stride: [[begin, end), ...] slices of the whole
// context's tokens, after checking each window is [CLS] question [SEP] that slice [SEP] [PAD]...
// (type ids 0 up to the first [SEP] and 1 after it, padding type 0 and attention 0); or the
// library's error message. tokenizers panics (aborting node; Python raises PanicException) when
// the context must be cut and the stride is not below its share of max_length: that is said
// instead of called.
async function features(tokenizer, id, question, context, qe, cIds, cOff, maxLength, stride, where) {
  const budget = maxLength - qe.getLength() - 3;
  if (budget > 0 && cIds.length > budget && stride >= budget)
    return 'panic: assertion failed: stride < max_len';
  tokenizer.setTruncation(maxLength, {stride, strategy: 'OnlySecond'});
  tokenizer.setPadding({maxLength, padId: id.pad, padTypeId: 0, padToken: '[PAD]'});
  let e;
  try {
    e = await tokenizer.encode(question, context);
  } catch (err) {
    return String(err.message || err).split('\n')[0];
  } finally {
    tokenizer.disableTruncation();
    tokenizer.disablePadding();
  }
  const windows = [];
  for (const f of [e, ...e.getOverflowing()]) {
    const ids = f.getIds(), mask = f.getAttentionMask(), seqIds = f.getSequenceIds();
    const offsets = f.getOffsets(), types = f.getTypeIds();
    const n = mask.indexOf(0) < 0 ? ids.length : mask.indexOf(0);
    const b = seqIds.indexOf(1);
    let len = 0;
    while (b >= 0 && b + len < n && seqIds[b + len] === 1) ++len;
    // the first slice at or after the previous window's start that matches ids and offsets
    const from = windows.length === 0 ? 0 : windows[windows.length - 1][0];
    let start = -1;
    for (let s = from; s + len <= cIds.length && start < 0; ++s)
      if (cIds.slice(s, s + len).join() === ids.slice(b, b + len).join() &&
          cOff.slice(s, s + len).join() === offsets.slice(b, b + len).join())
        start = s;
    const expect = [id.cls, ...qe.getIds(), id.sep, ...cIds.slice(start, start + len), id.sep];
    if (start < 0 || expect.join() !== ids.slice(0, n).join() ||
        types.slice(0, n).join('') !== '0'.repeat(qe.getLength() + 2) + '1'.repeat(len + 1) ||
        ids.slice(n).some(x => x !== id.pad) || mask.slice(n).some(x => x !== 0) ||
        types.slice(n).some(x => x !== 0))
      throw new Error(`${where}: a window is not [CLS] q [SEP] context slice [SEP] [PAD]...`);
    windows.push([start, start + len]);
  }
  return windows;
}

async function main() {
  const shared = process.argv[2] || '../shared/golden';
  const vocab = path.join(shared, 'vocab.txt');
  const emit = o => process.stdout.write(JSON.stringify(o) + '\n');
  for (const lower of [true, false]) {
    const {tokenizer} = bertTokenizer(vocab, lower);
    const file = path.join(shared, 'tokenization', lower ? 'tokenization_uncased.jsonl' : 'tokenization_cased.jsonl');
    for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
      if (!line) continue;
      const c = JSON.parse(line);
      if (c.input_is_bytes) continue;  // transformers takes str, not bytes
      const e = await tokenizer.encode(c.input, null, {addSpecialTokens: false});
      emit({kind: 'text', lower, id: c.id, ids: e.getIds(), offsets: e.getOffsets()});
    }
  }
  // uncased: four window shapes (24/12: the stride too long for most); cased: SQuAD's own
  // uncased: four window shapes (24/12: the stride too long for most); cased: SQuAD's own
  // random texts over a hostile alphabet (a fixed xorshift generator: the same texts every run)
  const alphabet = ['a', 'b', 'e', 'T', 'Z', '0', '7', ' ', '  ', '\t', '\n', '\r', '\u00a0', '\u3000',
                    '\u2028', '\u0085', '\u000b', '\u00ad', '\u200b', '\ufeff', '\u0000', '\ufffd',
                    '\u0301', '\u0308', '\u00e9', '\u00c5', '\u0130', '\u03a3', '\u00df', '\ufb01',
                    '\u4e2d', '\u6587', '\u3042', '\ud55c', '\u1100', '\u0627', '\u05d0', '\u0e01',
                    '.', ',', '!', '$', '^', '`', '~', '\u2014', '\u00bf', '\u3001', '\ud83d\ude00',
                    '\ue000', '\u0378', '[SEP]', '[CLS]', '[MASK]', '[sep]', '[', ']', 'running',
                    'unaffable', '##', 'isn\'t', 'caf\u00e9', 'na\u0308ive'];
  let x = 88172645;
  const next = n => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x % n; };
  for (let k = 0; k < 300; ++k) {
    let text = '';
    for (let n = 1 + next(24); n > 0; --n) text += alphabet[next(alphabet.length)];
    for (const lower of [true, false]) {
      const {tokenizer} = bertTokenizer(vocab, lower);
      const e = await tokenizer.encode(text, null, {addSpecialTokens: false});
      emit({kind: 'random', lower, text, ids: e.getIds(), offsets: e.getOffsets()});
    }
  }
  const settings = lower => lower ? [[384, 128], [64, 16], [24, 3], [24, 12]] : [[384, 128]];
  for (const rel of ['squad_pipeline/dataset-v1.1.json', 'squad/dataset-v1.1.json']) {
    const qs = squadQuestions(path.join(shared, rel));
    for (const lower of [true, false]) {
      const {tokenizer, pad, cls, sep} = bertTokenizer(vocab, lower);
      const contexts = new Map();  // context text -> index of its "context" line
      for (let k = 0; k < qs.length; ++k) {
        const question = qs[k].question.replace(PY_SPACE, '');
        tokenizer.disableTruncation();
        tokenizer.disablePadding();
        const qe = await tokenizer.encode(question, null, {addSpecialTokens: false});
        const ce = await tokenizer.encode(qs[k].context, null, {addSpecialTokens: false});
        const cIds = ce.getIds(), cOff = ce.getOffsets();
        if (!contexts.has(qs[k].context)) {
          contexts.set(qs[k].context, contexts.size);
          emit({kind: 'context', file: rel, lower, context: contexts.size - 1, ids: cIds,
                offsets: cOff.flat()});
        }
        const windows = {};
        for (const [maxLength, stride] of settings(lower))
          windows[`${maxLength}/${stride}`] =
              await features(tokenizer, {pad, cls, sep}, question, qs[k].context, qe, cIds, cOff,
                             maxLength, stride, `${rel} question ${k}`);
        emit({kind: 'features', file: rel, lower, question: k, question_ids: qe.getIds(),
              context: contexts.get(qs[k].context), windows});
      }
    }
  }
}
main().catch(e => { console.error(e); process.exit(1); });
