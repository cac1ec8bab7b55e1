// transformers' BertTokenizerFast: HuggingFace tokenizers' pipeline as transformers'
// BertConverter builds it from vocab.txt, with every token's span in the input text, as
// run_qa.py's prepare_validation_features asks for it (return_offsets_mapping):
// 1. the special tokens [PAD] [UNK] [CLS] [SEP] [MASK] (those in the vocabulary) split the text
//    wherever they occur literally, case-sensitively, and stay whole (AddedVocabulary; they are
//    not normalized);
// 2. BertNormalizer on each other piece: drop NUL, U+FFFD and every Cc, Cf, Co character but
//    \t \n \r (unassigned ones stay); White_Space -> ' '; a space on each side of a CJK ideograph
//    (google's blocks, but U+2B820..U+2B91F not: tokenizers' table starts that block at U+2B920);
//    uncased: NFD, drop Mn, then lower-case each character (no final sigma);
// 3. BertPreTokenizer: split on White_Space, each punctuation character (ASCII or P*) alone;
// 4. WordPiece: greedy longest match with "##" continuations; a word over 100 characters or with
//    a remainder no piece matches is one [UNK] spanning the word.
// A token's span runs from the first to the last input character its normalized characters came
// from ([begin, end) in code points: Python str indices).
// Differences from the slow BertTokenizer (data/tokenizer.hpp, TokenizerRules::transformers):
// accents are stripped before lower-casing, whitespace is Unicode's White_Space (Python's
// str.split() also splits on \x1c-\x1f, which both drop as controls anyway), and there is no
// never_split; for the texts of SQuAD they give the same tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace bertbench::data {

struct TokenSpans {
    std::vector<int32_t> ids;
    std::vector<int32_t> begin, end;  // code points of the input, [begin, end)
    size_t size() const { return ids.size(); }
    void clear() { ids.clear(), begin.clear(), end.clear(); }
};

class FastBertTokenizer {
public:
    // Error naming the vocabulary when a word needs [UNK] and it has none (tokenizers: "WordPiece
    // error: Missing [UNK] token from the vocabulary"), at the first such word.
    FastBertTokenizer(const Vocab& vocab, bool do_lower_case);
    // Appends the tokens of `text` (valid UTF-8) to `out`, without special tokens around them.
    void encode(std::string_view text, TokenSpans& out);
    const Vocab& vocab() const { return vocab_; }

private:
    void encode_piece(size_t begin, size_t end, TokenSpans& out);  // of cps_
    void word(size_t begin, size_t end, TokenSpans& out);          // of norm_/pos_
    const Vocab& vocab_;
    bool lower_;
    WordpieceTokenizer wordpiece_;
    int32_t unk_id_;
    std::vector<std::pair<std::u32string_view, int32_t>> specials_;  // in the vocabulary
    std::vector<char32_t> cps_, norm_, tmp_;
    std::vector<uint32_t> pos_, tmp_pos_, piece_ends_;
    std::string word_;
    std::vector<int32_t> piece_ids_;
};

}  // namespace bertbench::data
