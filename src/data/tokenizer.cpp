// BasicTokenizer / WordpieceTokenizer / FullTokenizer; see tokenizer.hpp. The order of
// operations follows tokenization.py: clean (drop NUL, U+FFFD, Cc/Cf; whitespace -> ' '),
// space out CJK, split on str.split() whitespace, then per token lower()+NFD-strip-Mn (uncased
// only) and split off punctuation; the final re-split on whitespace drops empty tokens.
#include "data/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "core/error.hpp"
#include "core/json_safe.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::data {
namespace {

enum AsciiClass : uint8_t { kDrop, kSpace, kPunct, kWord };

constexpr std::array<uint8_t, 128> make_ascii_table() {
    std::array<uint8_t, 128> t{};
    for (int c = 0; c < 128; ++c) {
        uint8_t k = kWord;
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') k = kSpace;
        else if (c < 0x20 || c == 0x7F) k = kDrop;  // Cc (NUL included); \x0b \x0c \x1c.. too
        else if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
                 (c >= 123 && c <= 126)) k = kPunct;
        t[static_cast<size_t>(c)] = k;
    }
    return t;
}
constexpr std::array<uint8_t, 128> kAscii = make_ascii_table();

// NVIDIA's BasicTokenizer never_split tuple (transformers' BertTokenizer special tokens).
constexpr std::string_view kNeverSplit[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};

bool is_never_split(const std::vector<char32_t>& w) {
    for (const std::string_view s : kNeverSplit)
        if (std::equal(w.begin(), w.end(), s.begin(), s.end())) return true;
    return false;
}

}  // namespace

void BasicTokenizer::finish_word(TokenList& out, std::vector<uint32_t>* out_chars) {
    if (word_.empty()) return;
    if (never_split_ && is_never_split(word_)) {  // NVIDIA's never_split: the token as it is
        for (const char32_t cp : word_) out.bytes.push_back(static_cast<char>(cp));
        out.push_end();
        if (out_chars) out_chars->push_back(static_cast<uint32_t>(word_.size()));
        word_.clear();
        word_ascii_ = true;
        return;
    }
    const std::vector<char32_t>* w = &word_;
    if (lower_ && !word_ascii_) {
        tmp_.clear();
        uni::py_lower(word_, tmp_);
        tmp2_.clear();
        uni::nfd_strip_accents(tmp_, tmp2_);
        w = &tmp2_;
    }
    // Split off punctuation; each run of non-punctuation is one token.
    bool open = false;
    uint32_t chars = 0;
    for (char32_t cp : *w) {
        const bool punct = cp < 0x80 ? kAscii[cp] == kPunct : uni::is_punctuation(cp);
        if (punct) {
            if (open) {
                out.push_end();
                if (out_chars) out_chars->push_back(chars);
                open = false;
            }
            out.bytes.push_back(static_cast<char>(cp));
            if (cp >= 0x80) {
                out.bytes.pop_back();
                uni::append_utf8(out.bytes, cp);
            }
            out.push_end();
            if (out_chars) out_chars->push_back(1);
        } else {
            if (!open) {
                open = true;
                chars = 0;
            }
            if (cp < 0x80) {
                out.bytes.push_back(static_cast<char>(lower_ && cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
            } else {
                uni::append_utf8(out.bytes, cp);
            }
            ++chars;
        }
    }
    if (open) {
        out.push_end();
        if (out_chars) out_chars->push_back(chars);
    }
    word_.clear();
    word_ascii_ = true;
}

void BasicTokenizer::tokenize(std::string_view text, TokenList& out,
                              std::vector<uint32_t>* out_chars) {
    word_.clear();
    word_ascii_ = true;
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        // Fast path: a whitespace-delimited token made only of ASCII, starting at i (word_ is
        // empty here). Lower-casing and punctuation splitting act per character, and NFD is the
        // identity on ASCII, so pieces go straight to `out`.
        if (word_.empty()) {
            while (i < n && p[i] < 0x80 && kAscii[p[i]] == kSpace) ++i;
            size_t j = i;
            while (j < n && p[j] < 0x80 && kAscii[p[j]] != kSpace) ++j;
            // the token [i, j) is all ASCII (NVIDIA's rules: one that may be a never_split token
            // takes the general path, which sees it whole after _clean_text)
            if ((j == n || p[j] < 0x80) &&
                !(never_split_ && std::memchr(p + i, '[', j - i) != nullptr)) {
                // Output is at most j - i bytes; write through a raw pointer.
                const size_t base = out.bytes.size();
                out.bytes.resize(base + (j - i));
                char* dst = out.bytes.data() + base;
                char* w = dst;
                char* piece = w;  // start of the open non-punctuation piece
                auto close_piece = [&] {
                    if (w != piece) {
                        out.ends.push_back(static_cast<uint32_t>(base + static_cast<size_t>(w - dst)));
                        if (out_chars) out_chars->push_back(static_cast<uint32_t>(w - piece));
                    }
                };
                for (; i < j; ++i) {
                    const unsigned c = p[i];
                    const uint8_t k = kAscii[c];
                    if (k == kWord) {
                        *w++ = static_cast<char>(lower_ && c - 'A' < 26u ? c + 32 : c);
                    } else if (k == kPunct) {
                        close_piece();
                        *w++ = static_cast<char>(c);
                        out.ends.push_back(static_cast<uint32_t>(base + static_cast<size_t>(w - dst)));
                        if (out_chars) out_chars->push_back(1);
                        piece = w;
                    }  // kDrop: removed by _clean_text, joins its neighbours
                }
                close_piece();
                out.bytes.resize(base + static_cast<size_t>(w - dst));
                continue;
            }
            // A non-ASCII byte follows inside this token: take the general path from i.
        }
        // General path: ASCII bytes up to the next non-ASCII byte.
        while (i < n && p[i] < 0x80) {
            const unsigned c = p[i++];
            switch (kAscii[c]) {
                case kSpace: finish_word(out, out_chars); break;
                case kDrop: break;
                default: word_.push_back(c); break;
            }
            if (word_.empty() && i < n && p[i] < 0x80) break;  // back to the fast path
        }
        if (i >= n || p[i] < 0x80) continue;
        // Non-ASCII: decode the run of non-ASCII bytes (up to the next ASCII byte).
        size_t j = i;
        while (j < n && p[j] >= 0x80) ++j;
        thread_local std::vector<char32_t> cps;
        cps.clear();
        uni::decode_utf8_ignore(text.substr(i, j - i), cps);
        i = j;
        for (char32_t cp : cps) {
            if (cp == 0xFFFD || (nvidia_ ? uni::is_other(cp) : uni::is_control(cp))) continue;
            if (uni::is_whitespace(cp) || cp == 0x2028 || cp == 0x2029) {
                // Zs -> ' ' (_clean_text); U+2028/U+2029 are str.split() whitespace too.
                finish_word(out, out_chars);
            } else if (uni::is_chinese_char(cp)) {
                finish_word(out, out_chars);
                word_.push_back(cp);
                word_ascii_ = false;
                finish_word(out, out_chars);
            } else {
                word_.push_back(cp);
                word_ascii_ = false;
            }
        }
    }
    finish_word(out, out_chars);
}

void WordpieceTokenizer::tokenize(std::string_view word, uint32_t chars, std::vector<int32_t>& ids,
                                  std::vector<uint32_t>* piece_ends) const {
    const auto whole_word = [&](int32_t id) {
        ids.push_back(id);
        if (piece_ends) piece_ends->push_back(static_cast<uint32_t>(word.size()));
    };
    if (chars > static_cast<uint32_t>(max_chars_)) return whole_word(kUnk);
    const int32_t whole = word.size() <= vocab_.max_token_bytes() ? vocab_.find(word) : -1;
    if (whole >= 0) return whole_word(whole);
    // Greedy longest match over code-point boundaries.
    const size_t mark = ids.size();
    size_t start = 0;
    const size_t n = word.size();
    while (start < n) {
        // Substrings longer than the longest vocabulary entry cannot match: start below that.
        const size_t limit = start == 0 ? vocab_.max_token_bytes() : vocab_.max_continuation_bytes();
        size_t end = n - start > limit ? start + limit : n;
        if (end < n)
            while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
        int32_t found = -1;
        while (start < end) {
            const std::string_view sub = word.substr(start, end - start);
            found = start == 0 ? vocab_.find(sub) : vocab_.find_continuation(sub);
            if (found >= 0) break;
            // step back one code point
            --end;
            while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
        }
        if (found < 0) {
            if (piece_ends) piece_ends->resize(piece_ends->size() - (ids.size() - mark));
            ids.resize(mark);
            return whole_word(kUnk);
        }
        ids.push_back(found);
        if (piece_ends) piece_ends->push_back(static_cast<uint32_t>(end));
        start = end;
    }
}

FullTokenizer::FullTokenizer(const Vocab& vocab, bool do_lower_case, TokenizerRules rules)
    : vocab_(vocab),
      transformers_(rules == TokenizerRules::transformers),
      lower_(do_lower_case),
      basic_(do_lower_case, rules),
      wordpiece_(vocab, rules == TokenizerRules::google ? 200 : 100),
      unk_id_(vocab.find("[UNK]")) {
    // transformers' _tokenize passes its special tokens as never_split; lower-cased text cannot
    // hold one (see split_basic)
    if (transformers_) basic_.set_never_split(!do_lower_case);
}

void FullTokenizer::split_basic(std::string_view text) {
    words_.clear();
    chars_.clear();
    if (!transformers_) return basic_.tokenize(text, words_, &chars_);
    // transformers' PreTrainedTokenizer.tokenize: with lower-casing every character but the
    // special tokens' lower-cased on its own; the special tokens' literal occurrences split the
    // text (the earliest first, as its trie) and are kept whole; the rest is BertTokenizer's.
    std::vector<char32_t> cps, one, lowered;
    std::string piece;
    for (size_t i = 0;;) {
        size_t at = std::string_view::npos, len = 0;
        for (const std::string_view s : kNeverSplit)
            if (const size_t k = text.find(s, i); k < at) at = k, len = s.size();
        const std::string_view segment = text.substr(i, at == std::string_view::npos ? at : at - i);
        if (lower_) {
            cps.clear(), piece.clear();
            uni::decode_utf8_ignore(segment, cps);
            for (const char32_t cp : cps) {
                one.assign(1, cp), lowered.clear();
                uni::py_lower(one, lowered);
                for (const char32_t c : lowered) uni::append_utf8(piece, c);
            }
            basic_.tokenize(piece, words_, &chars_);
        } else {
            basic_.tokenize(segment, words_, &chars_);
        }
        if (at == std::string_view::npos) break;
        words_.bytes.append(text.substr(at, len));
        words_.push_end();
        chars_.push_back(static_cast<uint32_t>(len));
        i = at + len;
    }
}

// Word w's pieces, ids[mark..]: its [UNK]s as the vocabulary's id, or the reference's KeyError.
void FullTokenizer::resolve_unk(size_t w, std::vector<int32_t>& ids, size_t mark) const {
    for (size_t k = mark; k < ids.size(); ++k) {
        if (ids[k] != WordpieceTokenizer::kUnk) continue;
        if (unk_id_ < 0)
            fail("--vocab_file {}: the word {} is not in the vocabulary, which has no \"[UNK]\" token "
                 "(the reference raises KeyError here)", vocab_.path(), json_safe::quoted(words_[w]));
        ids[k] = unk_id_;
    }
}

void FullTokenizer::tokenize_ids(std::string_view text, std::vector<int32_t>& ids) {
    split_basic(text);
    for (size_t w = 0; w < words_.size(); ++w) {
        const size_t mark = ids.size();
        wordpiece_.tokenize(words_[w], chars_[w], ids);
        resolve_unk(w, ids, mark);
    }
}

void FullTokenizer::tokenize(std::string_view text, std::vector<std::string>* basic_tokens,
                             std::vector<std::string>* tokens, std::vector<int32_t>* ids) {
    split_basic(text);
    if (basic_tokens)
        for (size_t w = 0; w < words_.size(); ++w) basic_tokens->emplace_back(words_[w]);
    piece_ids_.clear();
    for (size_t w = 0; w < words_.size(); ++w) {
        const size_t mark = piece_ids_.size();
        wordpiece_.tokenize(words_[w], chars_[w], piece_ids_);
        for (size_t k = mark; k < piece_ids_.size(); ++k)
            if (tokens)
                tokens->push_back(piece_ids_[k] == WordpieceTokenizer::kUnk ? "[UNK]" : vocab_.token(piece_ids_[k]));
        if (ids) resolve_unk(w, piece_ids_, mark);
    }
    if (ids) ids->insert(ids->end(), piece_ids_.begin(), piece_ids_.end());
}

}  // namespace bertbench::data
