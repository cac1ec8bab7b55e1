// WordPiece vocabulary, loaded as tokenization.load_vocab does: lines split on '\n' with every
// '\r' deleted (tf.gfile readline), each line str.strip()ped (a line that is not UTF-8 is an error,
// as TF's text-mode read fails on it); token i is
// line i. A repeated token maps to its LAST line (dict assignment) but keeps the position of its
// first line in keys() (OrderedDict), which create_pretraining_data uses for random words.
// Lookups go through an open-addressing hash table of string_views (no allocation per lookup).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertbench::data {

class Vocab {
public:
    Vocab() = default;
    static Vocab load(const std::string& path);            // Error if missing or empty
    static Vocab from_text(std::string_view file_bytes, const std::string& where);

    int32_t size() const { return static_cast<int32_t>(lines_.size()); }  // lines
    const std::string& token(int32_t id) const { return lines_[static_cast<size_t>(id)]; }
    int32_t find(std::string_view token) const { return whole_.find(token, lines_); }  // -1: absent
    // Lookup of "##" + suffix without building the string.
    int32_t find_continuation(std::string_view suffix) const { return cont_.find(suffix, lines_); }
    // list(vocab.keys()) as ids: unique tokens in order of first appearance, each mapped to
    // vocab[token] (its last line).
    const std::vector<int32_t>& key_ids() const { return key_ids_; }
    // Id of a required special token; Error naming the vocabulary file if it is missing.
    int32_t require(std::string_view token) const;
    const std::string& path() const { return path_; }
    // Longest token in bytes (for continuations: without the "##"); longer strings never match.
    size_t max_token_bytes() const { return max_whole_; }
    size_t max_continuation_bytes() const { return max_cont_; }

private:
    // Open addressing, linear probing. A slot holds (hash tag << 32) | (id + 1), 0 = empty, so a
    // probe touches the token's bytes only when the 32-bit tags agree. `skip` leading bytes of
    // the stored token are ignored when comparing (2 for the "##" table).
    struct Table {
        std::vector<uint64_t> slots;
        uint64_t mask = 0;
        int skip = 0;
        void init(size_t n, int skip_bytes);
        void insert(std::string_view key, int32_t id);  // key must not be present yet
        int32_t find(std::string_view key, const std::vector<std::string>& lines) const;
    };
    std::vector<std::string> lines_;
    std::vector<int32_t> key_ids_;
    Table whole_, cont_;
    std::string path_;
    size_t repeat_line_ = 0, repeat_first_line_ = 0;  // the first line repeating a token (1-based), 0: none
    size_t repeats_ = 0;                               // lines repeating an earlier line's token
    size_t max_whole_ = 0, max_cont_ = 0;
};

uint64_t hash_bytes(std::string_view s);

}  // namespace bertbench::data
