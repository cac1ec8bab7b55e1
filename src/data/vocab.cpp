// Vocabulary loading and lookup; semantics of tokenization.load_vocab (see vocab.hpp).
#include "data/vocab.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "data/unicode_text.hpp"

namespace bertbench::data {

uint64_t hash_bytes(std::string_view s) {
    // 8 bytes at a time, multiply-xorshift mixing; tokens are short.
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (s.size() * 0xFF51AFD7ED558CCDULL);
    const char* p = s.data();
    size_t n = s.size();
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4FULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        h = (h ^ w) * 0xC2B2AE3D27D4EB4FULL;
        h ^= h >> 29;
    }
    h *= 0x165667B19E3779F9ULL;
    h ^= h >> 32;
    return h;
}

void Vocab::Table::init(size_t n, int skip_bytes) {
    skip = skip_bytes;
    uint64_t cap = 16;
    while (cap < n * 2 + 1) cap <<= 1;
    slots.assign(cap, 0);
    mask = cap - 1;
}

void Vocab::Table::insert(std::string_view key, int32_t id) {
    const uint64_t h = hash_bytes(key);
    uint64_t i = h & mask;
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = (h >> 32 << 32) | static_cast<uint32_t>(id + 1);
}

int32_t Vocab::Table::find(std::string_view key, const std::vector<std::string>& lines) const {
    if (slots.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    const uint64_t tag = h >> 32;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        const uint64_t s = slots[i];
        if (s == 0) return -1;
        if ((s >> 32) != tag) continue;
        const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(s)) - 1;
        const std::string& t = lines[static_cast<size_t>(id)];
        if (t.size() == key.size() + static_cast<size_t>(skip) &&
            std::memcmp(t.data() + skip, key.data(), key.size()) == 0)
            return id;
    }
}

Vocab Vocab::from_text(std::string_view bytes, const std::string& where) {
    Vocab v;
    v.path_ = where;
    size_t pos = 0;
    std::string line;
    while (pos < bytes.size()) {
        size_t nl = bytes.find('\n', pos);
        const size_t end = nl == std::string_view::npos ? bytes.size() : nl + 1;
        std::string_view raw = bytes.substr(pos, end - pos);
        pos = end;
        if (raw.find('\r') != std::string_view::npos) {
            line.clear();
            for (char c : raw)
                if (c != '\r') line.push_back(c);
            raw = line;
        }
        // load_vocab reads through TF's text-mode GFile, which stops on such bytes
        if (const size_t at = json_safe::invalid_utf8_at(raw); at != std::string_view::npos)
            fail("{}: line {}: expected UTF-8 text, got the byte 0x{:02x} at offset {} (google's "
                 "tokenization.load_vocab stops on it with UnicodeDecodeError)",
                 where, v.lines_.size() + 1, static_cast<unsigned char>(raw[at]), at);
        const std::string text(raw);
        if (text.empty()) break;  // readline() returned "": end of file as the reference sees it
        v.lines_.emplace_back(uni::py_strip(text));
    }
    // dict semantics: last line wins; keys() keeps first-appearance order.
    const size_t n = v.lines_.size();
    Table first;  // each distinct token -> its first line
    first.init(n, 0);
    std::vector<int32_t> unique_first;
    for (int32_t id = 0; id < static_cast<int32_t>(n); ++id) {
        const std::string& t = v.lines_[static_cast<size_t>(id)];
        if (const int32_t seen = first.find(t, v.lines_); seen < 0) {
            first.insert(t, id);
            unique_first.push_back(id);
        } else if (v.repeats_++ == 0) {
            v.repeat_line_ = static_cast<size_t>(id) + 1;
            v.repeat_first_line_ = static_cast<size_t>(seen) + 1;
        }
    }
    std::vector<int32_t> last_of_first(n, -1);
    for (int32_t id = 0; id < static_cast<int32_t>(n); ++id)
        last_of_first[static_cast<size_t>(first.find(v.lines_[static_cast<size_t>(id)], v.lines_))] = id;
    v.whole_.init(unique_first.size(), 0);
    size_t ncont = 0;
    for (int32_t f : unique_first) {
        const std::string& t = v.lines_[static_cast<size_t>(f)];
        ncont += t.size() >= 2 && t[0] == '#' && t[1] == '#';
    }
    v.cont_.init(ncont, 2);
    for (int32_t f : unique_first) {
        const int32_t id = last_of_first[static_cast<size_t>(f)];
        v.key_ids_.push_back(id);
        const std::string& t = v.lines_[static_cast<size_t>(id)];
        v.whole_.insert(t, id);
        v.max_whole_ = std::max(v.max_whole_, t.size());
        if (t.size() >= 2 && t[0] == '#' && t[1] == '#') {
            v.cont_.insert(std::string_view(t).substr(2), id);
            v.max_cont_ = std::max(v.max_cont_, t.size() - 2);
        }
    }
    return v;
}

Vocab Vocab::load(const std::string& path) {
    check_input_file(path, "--vocab_file", "a file (vocab.txt, one WordPiece per line)");
    const std::string text = read_file(path);
    // a tokenizers tokenizer.json (or another JSON document) read as lines would number its
    // punctuation as tokens, silently
    if (const size_t at = text.find_first_not_of(" \t\r\n"); at != std::string::npos && text[at] == '{' &&
                                                                   nlohmann::json::accept(text))
        fail("--vocab_file {}: expected a vocab.txt (one WordPiece token per line), found a JSON document (a "
             "Hugging Face tokenizer.json? its directory's vocab.txt is the vocabulary)", path);
    Vocab v = from_text(text, path);
    if (v.lines_.empty())
        fail("--vocab_file {}: the vocabulary is empty (expected one WordPiece token per line)", path);
    // the mark is no whitespace to str.strip(): google's (and Hugging Face's) load_vocab keep it in the token
    if (const std::string& first = v.lines_.front(); first.rfind("\xEF\xBB\xBF", 0) == 0) {
        const std::string rest = json_safe::quoted(first.substr(3));
        log::warn("--vocab_file {}: line 1 starts with a UTF-8 byte-order mark, which google's "
                  "tokenization.load_vocab keeps as part of that line's token: id 0 is the mark followed by {}, "
                  "and {} itself is not in the vocabulary (remove the mark: sed -i '1s/^\\xEF\\xBB\\xBF//' {})",
                  path, rest, rest, path);
    }
    // google's load_vocab (dict assignment): the repeat's id is its last line's, every id its line's;
    // MLPerf's copy skips a token already read, numbering the lines after it one lower
    if (v.repeat_line_ != 0)
        log::warn("--vocab_file {}: line {} repeats the token {} of line {}{}; ids follow google's "
                  "tokenization.py (each line's number; the token's id is its last line's), not MLPerf's "
                  "copy (which skips the repeats and numbers the lines after each one lower)",
                  path, v.repeat_line_, json_safe::quoted(v.lines_[v.repeat_line_ - 1]), v.repeat_first_line_,
                  v.repeats_ > 1 ? fmt::format(" ({} lines repeat an earlier line's token in all)", v.repeats_) : "");
    return v;
}

int32_t Vocab::require(std::string_view token) const {
    const int32_t id = find(token);
    if (id < 0)
        fail("--vocab_file {}: the vocabulary has no \"{}\" token, which this command needs (expected a "
             "BERT WordPiece vocabulary)",
             path_, token);
    return id;
}

}  // namespace bertbench::data
