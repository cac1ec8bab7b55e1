// FastBertTokenizer; see fast_tokenizer.hpp.
#include "data/fast_tokenizer.hpp"

#include <utf8proc.h>

#include "core/error.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::data {
namespace {

// tokenizers' normalizers/bert.rs is_control: unicode_categories' is_other(), which holds Cc, Cf,
// Co and Cs but not Cn (unassigned code points stay), except \t \n \r.
bool is_control(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    if (c < 0x80) return c < 0x20 || c == 0x7F;
    const auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
           k == UTF8PROC_CATEGORY_CS;
}

// Its is_chinese_char: google's blocks but 0x2B920 where google has 0x2B820 (U+2B820..U+2B91F are
// not spaced out)
bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

FastBertTokenizer::FastBertTokenizer(const Vocab& vocab, bool do_lower_case)
    : vocab_(vocab), lower_(do_lower_case), wordpiece_(vocab, 100), unk_id_(vocab.find("[UNK]")) {
    for (const std::u32string_view s : {U"[PAD]", U"[UNK]", U"[CLS]", U"[SEP]", U"[MASK]"}) {
        std::string utf8;
        for (const char32_t c : s) uni::append_utf8(utf8, c);
        if (const int32_t id = vocab.find(utf8); id >= 0) specials_.emplace_back(s, id);
    }
}

void FastBertTokenizer::encode(std::string_view text, TokenSpans& out) {
    cps_.clear();
    uni::decode_utf8_ignore(text, cps_);
    const std::u32string_view all(cps_.data(), cps_.size());
    size_t from = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i] != U'[') continue;
        for (const auto& [s, id] : specials_) {
            if (all.substr(i, s.size()) != s) continue;
            encode_piece(from, i, out);
            out.ids.push_back(id);
            out.begin.push_back(static_cast<int32_t>(i));
            out.end.push_back(static_cast<int32_t>(i + s.size()));
            from = i + s.size();
            i = from - 1;
            break;
        }
    }
    encode_piece(from, all.size(), out);
}

void FastBertTokenizer::encode_piece(size_t begin, size_t end, TokenSpans& out) {
    // BertNormalizer, each character with the position of the input character it came from
    norm_.clear(), pos_.clear();
    for (size_t i = begin; i < end; ++i) {
        const char32_t c = cps_[i];
        const auto p = static_cast<uint32_t>(i);
        if (c == 0 || c == 0xFFFD || is_control(c)) continue;
        if (uni::is_rust_whitespace(c)) {
            norm_.push_back(U' '), pos_.push_back(p);
        } else if (is_chinese_char(c)) {
            norm_.insert(norm_.end(), {U' ', c, U' '});
            pos_.insert(pos_.end(), {p, p, p});
        } else {
            norm_.push_back(c), pos_.push_back(p);
        }
    }
    if (lower_) {
        tmp_.clear(), tmp_pos_.clear();
        uni::nfd_strip_accents(norm_, pos_, tmp_, tmp_pos_);
        norm_.clear(), pos_.clear();
        // char::to_lowercase: the simple mapping for every character but U+0130, which NFD has
        // already split into I and a dropped mark
        for (size_t k = 0; k < tmp_.size(); ++k) {
            const char32_t c = tmp_[k];
            norm_.push_back(c < 0x80 ? (c >= 'A' && c <= 'Z' ? c + 32 : c)
                                     : static_cast<char32_t>(
                                           utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
            pos_.push_back(tmp_pos_[k]);
        }
    }
    // BertPreTokenizer
    size_t w = 0;
    for (size_t k = 0; k < norm_.size(); ++k) {
        const char32_t c = norm_[k];
        if (uni::is_rust_whitespace(c)) {
            word(w, k, out);
            w = k + 1;
        } else if (uni::is_punctuation(c)) {
            word(w, k, out);
            word(k, k + 1, out);
            w = k + 1;
        }
    }
    word(w, norm_.size(), out);
}

void FastBertTokenizer::word(size_t begin, size_t end, TokenSpans& out) {
    if (begin >= end) return;
    word_.clear();
    for (size_t k = begin; k < end; ++k) uni::append_utf8(word_, norm_[k]);
    piece_ids_.clear(), piece_ends_.clear();
    wordpiece_.tokenize(word_, static_cast<uint32_t>(end - begin), piece_ids_, &piece_ends_);
    size_t byte = 0, chr = begin;  // the start of the current piece in word_ and in norm_
    for (size_t j = 0; j < piece_ids_.size(); ++j) {
        int32_t id = piece_ids_[j];
        if (id == WordpieceTokenizer::kUnk) {
            if (unk_id_ < 0)
                fail(
                    "--vocab_file {}: a word is not in the vocabulary and the vocabulary has no "
                    "\"[UNK]\" token (tokenizers: \"WordPiece error: Missing [UNK] token from the "
                    "vocabulary\")",
                    vocab_.path());
            id = unk_id_;
        }
        const size_t first = chr;
        while (byte < piece_ends_[j]) {  // advance one code point
            ++byte;
            while (byte < word_.size() && (static_cast<unsigned char>(word_[byte]) & 0xC0) == 0x80)
                ++byte;
            ++chr;
        }
        out.ids.push_back(id);
        out.begin.push_back(static_cast<int32_t>(pos_[first]));
        out.end.push_back(static_cast<int32_t>(pos_[chr - 1] + 1));
    }
}

}  // namespace bertbench::data
