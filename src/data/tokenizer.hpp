// BERT tokenization, exactly as google-research/bert tokenization.py (= MLPerf's copy):
// BasicTokenizer (invalid-UTF-8 drop, _clean_text, CJK spacing, whitespace split, lower-case +
// NFD accent stripping when do_lower_case, punctuation split), WordpieceTokenizer (greedy
// longest-match-first, "##" continuations, words over 200 characters -> [UNK]) and FullTokenizer.
// Fast path: ASCII characters are classified by a 256-entry table; buffers are reused, so a
// tokenizer allocates nothing per character once warm. Not thread-safe: one per thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocab.hpp"

namespace bertbench::data {

// A list of tokens stored back to back in one buffer.
struct TokenList {
    std::string bytes;
    std::vector<uint32_t> ends;  // token i is bytes[ends[i-1], ends[i])
    size_t size() const { return ends.size(); }
    std::string_view operator[](size_t i) const {
        const uint32_t b = i == 0 ? 0 : ends[i - 1];
        return std::string_view(bytes).substr(b, ends[i] - b);
    }
    void clear() { bytes.clear(), ends.clear(); }
    void push_end() { ends.push_back(static_cast<uint32_t>(bytes.size())); }
};

// Whose tokenization.py: google-research/bert's (= MLPerf's), or NVIDIA DeepLearningExamples'
// PyTorch copy (its run_squad.py), which differs in three places: a whitespace token equal to
// [UNK], [SEP], [PAD], [CLS] or [MASK] is kept whole (never lower-cased, stripped or split),
// _clean_text drops every category C* character (google: Cc and Cf only; so also private-use and
// unassigned code points), and a word over 100 characters is [UNK] (google: 200). transformers'
// BertTokenizer (slow, 4.28) is NVIDIA's with one more step first (PreTrainedTokenizer.tokenize):
// those five tokens' literal occurrences split the text anywhere (inside a word too) and are kept
// whole; with lower-casing the rest of the text is lower-cased character by character (no final
// sigma) before the basic tokenizer sees it, so there a token they form only after _clean_text is
// split like any other. Its BasicTokenizer alone (get_final_text's) has no never_split.
enum class TokenizerRules { google, nvidia_pytorch, transformers };

class BasicTokenizer {
public:
    explicit BasicTokenizer(bool do_lower_case, TokenizerRules rules = TokenizerRules::google)
        : lower_(do_lower_case),
          nvidia_(rules != TokenizerRules::google),
          never_split_(rules == TokenizerRules::nvidia_pytorch) {}
    // Appends the basic tokens of `text` (any bytes; invalid UTF-8 is dropped) to `out`.
    // Each token also records its length in code points in `out_chars` if non-null.
    void tokenize(std::string_view text, TokenList& out, std::vector<uint32_t>* out_chars = nullptr);
    // Whether a whitespace token equal to a special token is kept whole (NVIDIA's never_split).
    void set_never_split(bool on) { never_split_ = on; }

private:
    void finish_word(TokenList& out, std::vector<uint32_t>* out_chars);
    bool lower_, nvidia_, never_split_;
    std::vector<char32_t> word_, tmp_, tmp2_;  // current whitespace-delimited token
    bool word_ascii_ = true;
};

class WordpieceTokenizer {
public:
    explicit WordpieceTokenizer(const Vocab& vocab, int max_input_chars_per_word = 200)
        : vocab_(vocab), max_chars_(max_input_chars_per_word) {}
    static constexpr int32_t kUnk = -2;  // "[UNK]" (resolved to an id by the caller)
    // Appends the ids of the word pieces of one basic token (`chars` = its length in code
    // points), or kUnk. With `piece_ends`, also each piece's end in bytes of `word` (kUnk: the
    // whole word's).
    void tokenize(std::string_view word, uint32_t chars, std::vector<int32_t>& ids,
                  std::vector<uint32_t>* piece_ends = nullptr) const;

private:
    const Vocab& vocab_;
    int max_chars_;
};

class FullTokenizer {
public:
    FullTokenizer(const Vocab& vocab, bool do_lower_case, TokenizerRules rules = TokenizerRules::google);
    // Appends the WordPiece ids of `text`; [UNK] -> vocab["[UNK]"] (Error if the vocabulary has
    // no [UNK] and one is needed, where the reference raises KeyError).
    void tokenize_ids(std::string_view text, std::vector<int32_t>& ids);
    // Basic tokens and word-piece token strings, as the reference returns them.
    void tokenize(std::string_view text, std::vector<std::string>* basic_tokens,
                  std::vector<std::string>* tokens, std::vector<int32_t>* ids);
    const Vocab& vocab() const { return vocab_; }

private:
    void split_basic(std::string_view text);  // into words_ / chars_
    void resolve_unk(size_t w, std::vector<int32_t>& ids, size_t mark) const;
    const Vocab& vocab_;
    bool transformers_, lower_;
    BasicTokenizer basic_;
    WordpieceTokenizer wordpiece_;
    int32_t unk_id_;
    TokenList words_;
    std::vector<uint32_t> chars_;
    std::vector<int32_t> piece_ids_;
};

}  // namespace bertbench::data
