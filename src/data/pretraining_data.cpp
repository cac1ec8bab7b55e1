// create_pretraining_data.py, ported call for call (see pretraining_data.hpp). Reading text as
// the reference does: lines end at '\n' only; every '\r' byte is deleted (tf.gfile readline);
// invalid UTF-8 is dropped (convert_to_unicode); a line that str.strip()s to nothing starts a new
// document; a line whose tokens are empty adds nothing. A last line that decodes to "" is EOF.
// Every rng call below sits where the reference makes it; reordering any of them changes bytes.
#include "data/pretraining_data.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <thread>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "core/timing.hpp"
#include "data/unicode_text.hpp"
#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::data {
namespace {

// True if `line` (no '\n', '\r' already deleted) is empty after dropping invalid UTF-8 and
// str.strip(): every character is Python whitespace.
bool is_blank(std::string_view line) {
    size_t i = 0;
    for (; i < line.size(); ++i) {
        const auto c = static_cast<unsigned char>(line[i]);
        if (c >= 0x80) break;
        if (!uni::py_isspace(c)) return false;
    }
    if (i == line.size()) return true;
    thread_local std::vector<char32_t> cps;
    cps.clear();
    uni::decode_utf8_ignore(line.substr(i), cps);
    for (char32_t cp : cps)
        if (!uni::py_isspace(cp)) return false;
    return true;
}

// True if the bytes decode to at least one character once '\r' is deleted.
bool has_any_char(std::string_view piece) {
    std::vector<char32_t> cps;
    std::string no_cr;
    for (char c : piece)
        if (c != '\r') no_cr.push_back(c);
    uni::decode_utf8_ignore(no_cr, cps);
    return !cps.empty();
}

// The lines of one chunk of text, tokenized: sentences plus the positions of document breaks.
struct ChunkResult {
    std::vector<int32_t> tokens;
    std::vector<uint32_t> sentence_len;
    std::vector<uint32_t> breaks;  // a document break before sentence breaks[k] (chunk-local)
};

void tokenize_chunk(std::string_view text, bool is_file_end, FullTokenizer& tok, ChunkResult& out) {
    std::string buf;
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t nl = text.find('\n', pos);
        std::string_view line;
        if (nl == std::string_view::npos) {
            line = text.substr(pos);
            pos = text.size();
            // readline() at end of file without '\n': a result of "" means EOF.
            if (is_file_end && !has_any_char(line)) break;
        } else {
            line = text.substr(pos, nl - pos);
            pos = nl + 1;
        }
        if (line.find('\r') != std::string_view::npos) {
            buf.clear();
            for (char c : line)
                if (c != '\r') buf.push_back(c);
            line = buf;
        }
        if (is_blank(line)) {
            out.breaks.push_back(static_cast<uint32_t>(out.sentence_len.size()));
            continue;  // tokenize("") is empty: nothing else to add
        }
        const size_t before = out.tokens.size();
        tok.tokenize_ids(line, out.tokens);
        if (out.tokens.size() > before)
            out.sentence_len.push_back(static_cast<uint32_t>(out.tokens.size() - before));
    }
}

}  // namespace

void PretrainingConfig::validate() const {
    if (max_seq_length < 5 || max_seq_length > 65535)
        fail("--max_seq_length: expected an integer in [5, 65535] (room for [CLS] A [SEP] B [SEP]), "
             "got {}",
             max_seq_length);
    if (dupe_factor < 1)
        fail("--dupe_factor: expected >= 1 (how many times each document is drawn), got {}", dupe_factor);
    // Every record carries max_predictions_per_seq slots (padded): the same bound as the sequence,
    // not a value that pads each record to gigabytes and ends in the OOM killer
    if (max_predictions_per_seq < 0 || max_predictions_per_seq > 65535)
        fail("--max_predictions_per_seq: expected an integer in [0, 65535] (each record is padded to "
             "it; at most max_seq_length tokens are masked), got {}", max_predictions_per_seq);
    if (output_format == OutputFormat::hdf5 && max_predictions_per_seq < 1)
        fail("--max_predictions_per_seq: expected >= 1 with --output_format=hdf5 (bertbench's HDF5 "
             "reader needs masked_lm_* datasets at least 1 wide, so a (N, 0) shard could not be "
             "read back; --output_format=tfrecord writes records without predictions), got {}",
             max_predictions_per_seq);
    // Probabilities: the reference takes any number (a negative one masks one token a sequence, a
    // large one max_predictions_per_seq), which no recipe means.
    if (!(masked_lm_prob >= 0 && masked_lm_prob <= 1))
        fail("--masked_lm_prob: expected a probability in [0, 1], got {}", masked_lm_prob);
    if (!(short_seq_prob >= 0 && short_seq_prob <= 1))
        fail("--short_seq_prob: expected a probability in [0, 1], got {}", short_seq_prob);
}

OutputFormat parse_output_format(const std::string& name) {
    if (name == "tfrecord") return OutputFormat::tfrecord;
    if (name == "hdf5") return OutputFormat::hdf5;
    fail("--output_format: expected tfrecord or hdf5, got \"{}\"", name);
}

const char* output_extension(OutputFormat f) {
    return f == OutputFormat::hdf5 ? ".hdf5" : ".tfrecord";
}

CorpusBuilder::CorpusBuilder(const Vocab& vocab, bool do_lower_case, int threads,
                             size_t min_chunk_bytes)
    : vocab_(vocab), lower_(do_lower_case), threads_(std::max(1, threads)),
      min_chunk_(std::max<size_t>(1, min_chunk_bytes)), tok_(vocab, do_lower_case) {
    docs_.push_back(0);  // all_documents = [[]]
}

void CorpusBuilder::add_text(std::string_view text) {
    const uint64_t bytes_before = c_.bytes_read;
    c_.bytes_read += text.size();
    // Split into chunks at '\n' for parallel tokenization; results are merged in order (so the
    // chunking never changes the result). One thread with a progress callback: 64 MiB chunks.
    const size_t nchunks =
        threads_ == 1 ? (progress_ ? std::max<size_t>(1, text.size() >> 26) : 1)
                      : std::max<size_t>(1, std::min<size_t>(static_cast<size_t>(threads_) * 4,
                                                             text.size() / min_chunk_));
    std::vector<std::string_view> chunks;
    size_t pos = 0;
    for (size_t k = 0; k < nchunks && pos < text.size(); ++k) {
        size_t end = k + 1 == nchunks ? text.size() : text.size() * (k + 1) / nchunks;
        if (end < pos) end = pos;
        if (end < text.size()) {
            const size_t nl = text.find('\n', end);
            end = nl == std::string_view::npos ? text.size() : nl + 1;
        }
        chunks.push_back(text.substr(pos, end - pos));
        pos = end;
    }
    std::vector<ChunkResult> results(chunks.size());
    std::atomic<uint64_t> done{bytes_before};
    const auto chunk_done = [&](size_t k) {
        const uint64_t d = done.fetch_add(chunks[k].size()) + chunks[k].size();
        if (progress_) progress_(d);
    };
    if (threads_ == 1 || chunks.size() == 1) {
        for (size_t k = 0; k < chunks.size(); ++k) {
            tokenize_chunk(chunks[k], k + 1 == chunks.size(), tok_, results[k]);
            chunk_done(k);
        }
    } else {
        std::atomic<size_t> next{0};
        std::vector<std::exception_ptr> errors(static_cast<size_t>(threads_));
        std::vector<std::thread> pool;
        for (int t = 0; t < threads_; ++t) {
            pool.emplace_back([&, t] {
                try {
                    FullTokenizer tok(vocab_, lower_);
                    for (size_t k; (k = next.fetch_add(1)) < chunks.size();) {
                        tokenize_chunk(chunks[k], k + 1 == chunks.size(), tok, results[k]);
                        chunk_done(k);
                    }
                } catch (...) {
                    errors[static_cast<size_t>(t)] = std::current_exception();
                }
            });
        }
        for (auto& th : pool) th.join();
        for (auto& e : errors)
            if (e) std::rethrow_exception(e);
    }
    for (const ChunkResult& r : results) {
        size_t b = 0;
        uint64_t off = c_.tokens.size();
        c_.tokens.insert(c_.tokens.end(), r.tokens.begin(), r.tokens.end());
        for (size_t s = 0; s <= r.sentence_len.size(); ++s) {
            while (b < r.breaks.size() && r.breaks[b] == s) {
                docs_.push_back(static_cast<uint32_t>(c_.sentence_end.size()));
                ++b;
            }
            if (s == r.sentence_len.size()) break;
            off += r.sentence_len[s];
            c_.sentence_end.push_back(off);
        }
    }
}

namespace {

// Invalid UTF-8 is dropped (tokenization.convert_to_unicode's errors="ignore"), but google's
// script under Python 3 reads the corpus through TF's text-mode GFile, which stops on it with
// UnicodeDecodeError: one warning per file says where and how much.
void warn_invalid_utf8(const std::string& path, std::string_view text) {
    size_t lines = 0, first_line = 0, first_offset = 0;
    for (size_t pos = 0; pos < text.size();) {
        const size_t at = json_safe::invalid_utf8_at(text.substr(pos));
        if (at == std::string_view::npos) break;
        const size_t offset = pos + at;
        if (lines++ == 0) {
            first_offset = offset;
            first_line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
        }
        const size_t eol = text.find('\n', offset);
        pos = eol == std::string_view::npos ? text.size() : eol + 1;
    }
    if (lines > 0)
        log::warn("{}: {} line(s) hold bytes that are not UTF-8 (the first on line {}, byte offset {}); they are "
                  "dropped as tokenization.convert_to_unicode drops them, where google's script under Python 3 "
                  "stops with UnicodeDecodeError", path, lines, first_line, first_offset);
}

}  // namespace

void CorpusBuilder::add_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        fail("--input_file: {} is a directory (expected a text file; hint: --input_dir for shard mode)",
             path);
    const std::string text = read_file(path);
    warn_invalid_utf8(path, text);
    add_text(text);
}

Corpus CorpusBuilder::finish() {
    // Document d spans sentences [docs_[d], docs_[d+1]); drop the empty ones.
    docs_.push_back(static_cast<uint32_t>(c_.sentence_end.size()));
    c_.doc_first.clear();
    for (size_t d = 0; d + 1 < docs_.size(); ++d)
        if (docs_[d + 1] > docs_[d]) c_.doc_first.push_back(docs_[d]);
    // doc_first[d+1] must be the end of document d: store ends via the next non-empty start.
    // Empty documents hold no sentences, so the end of a non-empty document is the start of the
    // next non-empty one (or the total), and the representation stays consistent.
    c_.doc_first.push_back(static_cast<uint32_t>(c_.sentence_end.size()));
    Corpus out = std::move(c_);
    c_ = Corpus{};
    docs_.assign(1, 0);
    return out;
}

namespace {

struct Generator {
    Generator(const Corpus& c, const Vocab& vocab, const PretrainingConfig& config, PyRandom& r,
              Instances& o)
        : corpus(c), cfg(config), rng(r), key_ids(vocab.key_ids()), cls(vocab.require("[CLS]")),
          sep(vocab.require("[SEP]")), mask(vocab.require("[MASK]")), out(o) {
        if (cfg.do_whole_word_mask) {
            continuation.resize(static_cast<size_t>(vocab.size()));
            for (int32_t id = 0; id < vocab.size(); ++id)
                continuation[static_cast<size_t>(id)] = vocab.token(id).starts_with("##");
        }
    }
    const Corpus& corpus;
    const PretrainingConfig& cfg;
    PyRandom& rng;
    const std::vector<int32_t>& key_ids;
    int32_t cls, sep, mask;
    std::vector<uint32_t> doc_order;  // all_documents[k] = corpus document doc_order[k]
    Instances& out;

    std::vector<uint32_t> chunk;
    std::vector<int32_t> a, b, tokens;
    std::vector<bool> continuation;  // --do_whole_word_mask: token id starts with "##"
    // The masking candidates, positions grouped by word (cand_indexes): group g is
    // cand[group[g], group[g + 1]), taken in the shuffled `order`.
    std::vector<int32_t> cand;
    std::vector<uint32_t> group, order;
    std::vector<std::pair<int32_t, int32_t>> masked;

    uint32_t doc_first_sentence(size_t k) const { return corpus.doc_first[doc_order[k]]; }
    uint32_t doc_len(size_t k) const {
        return corpus.doc_first[doc_order[k] + 1] - corpus.doc_first[doc_order[k]];
    }
    uint64_t sent_begin(uint32_t s) const { return s == 0 ? 0 : corpus.sentence_end[s - 1]; }
    uint64_t sent_len(uint32_t s) const { return corpus.sentence_end[s] - sent_begin(s); }
    void append_sentence(std::vector<int32_t>& v, uint32_t s) const {
        const int32_t* p = corpus.tokens.data() + sent_begin(s);
        v.insert(v.end(), p, p + sent_len(s));
    }

    void from_document(size_t k) {
        const size_t ndocs = doc_order.size();
        const uint32_t s0 = doc_first_sentence(k);
        const int64_t len = doc_len(k);
        const int64_t max_num_tokens = cfg.max_seq_length - 3;
        int64_t target = max_num_tokens;
        if (rng.random() < cfg.short_seq_prob) target = rng.randint(2, max_num_tokens);

        chunk.clear();
        int64_t current_length = 0;
        int64_t i = 0;
        while (i < len) {
            const uint32_t seg = s0 + static_cast<uint32_t>(i);
            chunk.push_back(seg);
            current_length += static_cast<int64_t>(sent_len(seg));
            if (i == len - 1 || current_length >= target) {
                if (!chunk.empty()) {
                    int64_t a_end = 1;
                    if (chunk.size() >= 2) a_end = rng.randint(1, static_cast<int64_t>(chunk.size()) - 1);
                    a.clear();
                    b.clear();
                    for (int64_t j = 0; j < a_end; ++j) append_sentence(a, chunk[static_cast<size_t>(j)]);
                    bool is_random_next = false;
                    if (chunk.size() == 1 || rng.random() < 0.5) {
                        is_random_next = true;
                        const int64_t target_b = target - static_cast<int64_t>(a.size());
                        int64_t rdi = 0;
                        for (int t = 0; t < 10; ++t) {
                            rdi = rng.randint(0, static_cast<int64_t>(ndocs) - 1);
                            if (rdi != static_cast<int64_t>(k)) break;
                        }
                        const uint32_t r0 = doc_first_sentence(static_cast<size_t>(rdi));
                        const int64_t rlen = doc_len(static_cast<size_t>(rdi));
                        const int64_t rstart = rng.randint(0, rlen - 1);
                        for (int64_t j = rstart; j < rlen; ++j) {
                            append_sentence(b, r0 + static_cast<uint32_t>(j));
                            if (static_cast<int64_t>(b.size()) >= target_b) break;
                        }
                        i -= static_cast<int64_t>(chunk.size()) - a_end;  // put unused back
                    } else {
                        for (size_t j = static_cast<size_t>(a_end); j < chunk.size(); ++j)
                            append_sentence(b, chunk[j]);
                    }
                    emit(max_num_tokens, is_random_next);
                }
                chunk.clear();
                current_length = 0;
            }
            ++i;
        }
    }

    // truncate_seq_pair + [CLS] A [SEP] B [SEP] + create_masked_lm_predictions, then store.
    void emit(int64_t max_num_tokens, bool is_random_next) {
        size_t a0 = 0, a1 = a.size(), b0 = 0, b1 = b.size();
        while (static_cast<int64_t>((a1 - a0) + (b1 - b0)) > max_num_tokens) {
            const bool trunc_a = (a1 - a0) > (b1 - b0);
            size_t& front = trunc_a ? a0 : b0;
            size_t& back = trunc_a ? a1 : b1;
            BB_CHECK(back > front);
            if (rng.random() < 0.5) ++front;
            else --back;
        }
        BB_CHECK(a1 > a0 && b1 > b0);
        tokens.clear();
        tokens.push_back(cls);
        tokens.insert(tokens.end(), a.begin() + static_cast<std::ptrdiff_t>(a0),
                      a.begin() + static_cast<std::ptrdiff_t>(a1));
        tokens.push_back(sep);
        tokens.insert(tokens.end(), b.begin() + static_cast<std::ptrdiff_t>(b0),
                      b.begin() + static_cast<std::ptrdiff_t>(b1));
        tokens.push_back(sep);

        // create_masked_lm_predictions: a "##" piece joins the word before it (whole-word
        // masking; across [SEP] too, as the reference's list does), else it starts a group.
        cand.clear();
        group.clear();
        for (size_t p = 0; p < tokens.size(); ++p) {
            const int32_t t = tokens[p];
            if (t == cls || t == sep) continue;
            if (continuation.empty() || group.empty() || !continuation[static_cast<size_t>(t)])
                group.push_back(static_cast<uint32_t>(cand.size()));
            cand.push_back(static_cast<int32_t>(p));
        }
        const size_t ngroups = group.size();
        group.push_back(static_cast<uint32_t>(cand.size()));
        order.resize(ngroups);
        for (size_t g = 0; g < ngroups; ++g) order[g] = static_cast<uint32_t>(g);
        rng.shuffle(order);  // random.shuffle draws by the list's length alone
        // int(round(len(tokens) * masked_lm_prob)): round half to even on the double product.
        const double prod = static_cast<double>(tokens.size()) * cfg.masked_lm_prob;
        const double rounded = std::nearbyint(prod);
        int64_t num = rounded > 1e18 ? INT64_MAX : rounded < -1e18 ? INT64_MIN : static_cast<int64_t>(rounded);
        num = std::min<int64_t>(cfg.max_predictions_per_seq, std::max<int64_t>(1, num));
        masked.clear();
        for (const uint32_t g : order) {
            if (static_cast<int64_t>(masked.size()) >= num) break;
            // a word that would overshoot the predictions is skipped, not cut
            if (static_cast<int64_t>(masked.size() + (group[g + 1] - group[g])) > num) continue;
            for (uint32_t c = group[g]; c < group[g + 1]; ++c) {
                const int32_t idx = cand[c];
                const int32_t original = tokens[static_cast<size_t>(idx)];
                int32_t replacement;
                if (rng.random() < 0.8) {
                    replacement = mask;
                } else if (rng.random() < 0.5) {
                    replacement = original;
                } else {
                    replacement = key_ids[static_cast<size_t>(
                        rng.randint(0, static_cast<int64_t>(key_ids.size()) - 1))];
                }
                tokens[static_cast<size_t>(idx)] = replacement;
                masked.emplace_back(idx, original);
            }
        }
        std::sort(masked.begin(), masked.end());

        out.tokens.insert(out.tokens.end(), tokens.begin(), tokens.end());
        out.tok_off.push_back(out.tokens.size());
        out.a_len.push_back(static_cast<uint16_t>(a1 - a0));
        out.is_random_next.push_back(is_random_next ? 1 : 0);
        for (const auto& [pos, label] : masked) {
            out.mask_pos.push_back(pos);
            out.mask_label.push_back(label);
        }
        out.mask_off.push_back(out.mask_pos.size());
    }
};

}  // namespace

Instances create_training_instances(const Corpus& corpus, const Vocab& vocab,
                                    const PretrainingConfig& cfg, PyRandom& rng) {
    cfg.validate();
    Instances out;
    Generator g(corpus, vocab, cfg, rng, out);
    const size_t ndocs = corpus.num_documents();
    g.doc_order.resize(ndocs);
    std::iota(g.doc_order.begin(), g.doc_order.end(), 0u);
    rng.shuffle(g.doc_order);
    for (int d = 0; d < cfg.dupe_factor; ++d)
        for (size_t k = 0; k < ndocs; ++k) g.from_document(k);
    out.order.resize(out.size());
    std::iota(out.order.begin(), out.order.end(), 0u);
    rng.shuffle(out.order);
    return out;
}

namespace {

void append_joined(std::string& log, const char* name, const std::vector<int64_t>& v) {
    log += "INFO:tensorflow:";
    log += name;
    log += ": ";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) log += ' ';
        log += std::to_string(v[i]);
    }
    log += '\n';
}

// One instance -> its tf.train.Example bytes (write_instance_to_example_files), and the
// reference's log lines for it.
struct InstanceEncoder {
    InstanceEncoder(const Instances& instances, const PretrainingConfig& cfg)
        : inst(instances), L(static_cast<size_t>(cfg.max_seq_length)),
          P(static_cast<size_t>(cfg.max_predictions_per_seq)), input_ids(L), input_mask(L),
          segment_ids(L), positions(P), ids(P), weights(P) {}
    const Instances& inst;
    size_t L, P;
    std::vector<int64_t> input_ids, input_mask, segment_ids, positions, ids;
    std::vector<float> weights;
    int64_t nsl = 0;
    size_t len = 0, nm = 0;
    io::Example ex;

    void fill(size_t i) {
        const size_t t0i = inst.tok_off[i];
        len = inst.tok_off[i + 1] - t0i;
        const size_t seg0 = inst.a_len[i] + 2u;
        BB_CHECK(len <= L);
        for (size_t p = 0; p < L; ++p) {
            input_ids[p] = p < len ? inst.tokens[t0i + p] : 0;
            input_mask[p] = p < len ? 1 : 0;
            segment_ids[p] = p < len && p >= seg0 ? 1 : 0;
        }
        const size_t m0 = inst.mask_off[i];
        nm = inst.mask_off[i + 1] - m0;
        for (size_t p = 0; p < P; ++p) {
            positions[p] = p < nm ? inst.mask_pos[m0 + p] : 0;
            ids[p] = p < nm ? inst.mask_label[m0 + p] : 0;
            weights[p] = p < nm ? 1.0f : 0.0f;
        }
        nsl = inst.is_random_next[i];
    }

    // The record as the TFRecord would hold it (for the HDF5 writer).
    void record(size_t i, io::PretrainingRecord& r) {
        fill(i);
        r.input_ids = input_ids;
        r.input_mask = input_mask;
        r.segment_ids = segment_ids;
        r.masked_lm_positions = positions;
        r.masked_lm_ids = ids;
        r.masked_lm_weights = weights;
        r.next_sentence_labels = nsl;
    }

    void encode(size_t i, std::string& payload) {
        fill(i);
        ex.features.clear();
        ex.add_int64("input_ids", input_ids);
        ex.add_int64("input_mask", input_mask);
        ex.add_int64("segment_ids", segment_ids);
        ex.add_int64("masked_lm_positions", positions);
        ex.add_int64("masked_lm_ids", ids);
        ex.add_float("masked_lm_weights", weights);
        ex.add_int64("next_sentence_labels", std::span<const int64_t>(&nsl, 1));
        io::encode_example(ex, payload);
    }

    void log(size_t i, const Vocab& vocab, std::string& out) {
        fill(i);
        out += "INFO:tensorflow:*** Example ***\nINFO:tensorflow:tokens:";
        for (size_t p = 0; p < len; ++p) {
            out += ' ';
            out += vocab.token(inst.tokens[inst.tok_off[i] + p]);
        }
        out += '\n';
        append_joined(out, "input_ids", input_ids);
        append_joined(out, "input_mask", input_mask);
        append_joined(out, "segment_ids", segment_ids);
        append_joined(out, "masked_lm_positions", positions);
        append_joined(out, "masked_lm_ids", ids);
        out += "INFO:tensorflow:masked_lm_weights: ";  // Python str(float): 1.0 / 0.0
        for (size_t p = 0; p < P; ++p) {
            if (p) out += ' ';
            out += p < nm ? "1.0" : "0.0";
        }
        out += '\n';
        out += "INFO:tensorflow:next_sentence_labels: " + std::to_string(nsl) + "\n";
    }
};

}  // namespace

PretrainingResult create_pretraining_data(const std::vector<std::string>& input_files,
                                          const std::vector<std::string>& output_files,
                                          const Vocab& vocab, const PretrainingConfig& cfg,
                                          std::string* log, int threads, bool show_progress) {
    cfg.validate();
    if (output_files.empty()) fail("--output_file: no output file given");
    const bool hdf5 = cfg.output_format == OutputFormat::hdf5;
    for (const auto& f : output_files)
        if (io::is_hdf5_path(f) != hdf5)
            fail("--output_file: \"{}\": expected a name {}ending in .hdf5 or .h5 with "
                 "--output_format={}, as readers choose the format by extension",
                 f, hdf5 ? "" : "not ", hdf5 ? "hdf5" : "tfrecord");
    // Fail before any work on a vocabulary the reference would crash on later.
    vocab.require("[CLS]");
    vocab.require("[SEP]");
    vocab.require("[MASK]");
    vocab.require("[UNK]");
    PretrainingResult res;
    const double t0 = now_s();
    if (log) {
        *log += "INFO:tensorflow:*** Reading from input files ***\n";
        for (const auto& f : input_files) *log += "INFO:tensorflow:  " + f + "\n";
    }
    CorpusBuilder builder(vocab, cfg.do_lower_case, threads);
    std::unique_ptr<log::Progress> progress;
    uint64_t total_bytes = 0;
    if (show_progress) {
        progress = std::make_unique<log::Progress>(10.0);
        for (const auto& f : input_files) {
            std::error_code ec;
            const auto n = std::filesystem::file_size(f, ec);
            if (!ec) total_bytes += n;
        }
        builder.set_progress([&, t0](uint64_t done) {
            const double dt = now_s() - t0, mbs = done / 1e6 / std::max(dt, 1e-9);
            progress->update(fmt::format(
                "prepare: read+tokenize {:.1f}/{:.1f} MB, {:.1f} MB/s, ETA {:.0f} s", done / 1e6,
                total_bytes / 1e6, mbs,
                total_bytes > done ? (total_bytes - done) / 1e6 / std::max(mbs, 1e-9) : 0.0));
        });
    }
    for (const auto& f : input_files) builder.add_file(f);
    const Corpus corpus = builder.finish();
    if (progress)
        progress->update(fmt::format("prepare: read+tokenized {:.1f} MB in {:.1f} s; creating "
                                     "instances from {} documents",
                                     corpus.bytes_read / 1e6, now_s() - t0,
                                     corpus.num_documents()),
                         true);
    res.bytes_in = corpus.bytes_read;
    res.documents = corpus.num_documents();
    res.sentences = corpus.sentence_end.size();
    res.tokens = corpus.tokens.size();
    const double t1 = now_s();
    res.seconds_read = t1 - t0;

    PyRandom rng(cfg.random_seed);
    if (!cfg.random_seed_decimal.empty()) rng.seed_decimal(cfg.random_seed_decimal);
    const Instances inst = create_training_instances(corpus, vocab, cfg, rng);
    const double t2 = now_s();
    res.seconds_generate = t2 - t1;

    if (log) {
        *log += "INFO:tensorflow:*** Writing to output files ***\n";
        for (const auto& f : output_files) *log += "INFO:tensorflow:  " + f + "\n";
    }
    if (hdf5) {
        // NVIDIA's schema: whole arrays per file, written at the end (shapes depend on N).
        std::vector<io::Hdf5ShardWriter> h5;
        for (const auto& f : output_files)
            h5.emplace_back(f, cfg.max_seq_length, cfg.max_predictions_per_seq);
        InstanceEncoder e(inst, cfg);
        io::PretrainingRecord rec;
        for (size_t n = 0; n < inst.size(); ++n) {
            e.record(inst.order[n], rec);
            h5[n % h5.size()].write(rec);
        }
        if (log)
            for (size_t n = 0; n < std::min<size_t>(20, inst.size()); ++n)
                e.log(inst.order[n], vocab, *log);
        // Every file written and synced before any is renamed: an error on a later file leaves
        // no earlier one, and a stop signal waits for the renames (core/fs.hpp)
        std::vector<std::unique_ptr<AtomicFile>> files;
        for (auto& w : h5) files.push_back(w.stage());
        commit_together(files);
        for (auto& w : h5) res.bytes_out += std::filesystem::file_size(w.path());
        res.instances = inst.size();
        if (log)
            *log += "INFO:tensorflow:Wrote " + std::to_string(inst.size()) + " total instances\n";
        res.seconds_write = now_s() - t2;
        if (progress) progress->finish("");
        return res;
    }
    std::vector<std::unique_ptr<io::TfRecordWriter>> writers;
    for (const auto& f : output_files) writers.push_back(std::make_unique<io::TfRecordWriter>(f));
    // Encoding is independent per instance: blocks of instances are encoded on `threads`
    // threads, then written in order by this thread.
    const size_t block = threads > 1 ? 8192 : 256;
    std::vector<std::string> payloads(block);
    std::vector<InstanceEncoder> encoders(static_cast<size_t>(std::max(1, threads)),
                                          InstanceEncoder(inst, cfg));
    for (size_t b0 = 0; b0 < inst.size(); b0 += block) {
        const size_t b1 = std::min(inst.size(), b0 + block);
        auto encode_range = [&](size_t t, size_t lo, size_t hi) {
            for (size_t n = lo; n < hi; ++n) {
                payloads[n - b0].clear();
                encoders[t].encode(inst.order[n], payloads[n - b0]);
            }
        };
        if (encoders.size() == 1 || b1 - b0 < 64 * encoders.size()) {
            encode_range(0, b0, b1);
        } else {
            std::vector<std::thread> pool;
            const size_t nt = encoders.size();
            for (size_t t = 1; t < nt; ++t)
                pool.emplace_back(encode_range, t, b0 + (b1 - b0) * t / nt, b0 + (b1 - b0) * (t + 1) / nt);
            encode_range(0, b0, b0 + (b1 - b0) / nt);
            for (auto& th : pool) th.join();
        }
        for (size_t n = b0; n < b1; ++n) writers[n % writers.size()]->write(payloads[n - b0]);
        if (progress) {
            const double dt = now_s() - t2, rate = b1 / std::max(dt, 1e-9);
            progress->update(fmt::format("prepare: wrote {}/{} instances, ETA {:.0f} s", b1,
                                         inst.size(), (inst.size() - b1) / rate));
        }
    }
    if (progress) progress->finish("");
    if (log) {
        InstanceEncoder e(inst, cfg);
        for (size_t n = 0; n < std::min<size_t>(20, inst.size()); ++n) e.log(inst.order[n], vocab, *log);
    }
    std::vector<std::unique_ptr<AtomicFile>> files;  // all synced, then renamed as one (core/fs.hpp)
    for (auto& w : writers) {
        files.push_back(w->stage());
        res.bytes_out += w->bytes();
    }
    commit_together(files);
    res.instances = inst.size();
    if (log) *log += "INFO:tensorflow:Wrote " + std::to_string(inst.size()) + " total instances\n";
    res.seconds_write = now_s() - t2;
    return res;
}

}  // namespace bertbench::data
