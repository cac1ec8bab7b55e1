// create_pretraining_data.py (MLPerf cleanup_scripts copy = google-research/bert with default
// flags), byte for byte: documents from one-sentence-per-line text, NSP pairs with the reference's
// random-next logic, 15% masking 80/10/10 with random words from list(vocab.keys()), every random
// call in the reference's order on a Python-identical RNG, instances shuffled, TFRecords written
// round-robin with features in insertion order. Tokens are kept as ids in flat arrays (4 bytes
// per token); instances hold ~1.4x the corpus's tokens per dupe pass (random-next segments).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/pyrandom.hpp"
#include "data/tokenizer.hpp"
#include "data/vocab.hpp"

namespace bertbench::data {

// What `prepare` writes: the reference's TFRecords, or NVIDIA's HDF5 shards with the same
// records (io/hdf5_shard.hpp; output names must then end in .hdf5 or .h5, as readers pick the
// format by extension).
enum class OutputFormat { tfrecord, hdf5 };
OutputFormat parse_output_format(const std::string& name);  // "tfrecord" | "hdf5", else Error
const char* output_extension(OutputFormat f);               // ".tfrecord" | ".hdf5"

struct PretrainingConfig {
    OutputFormat output_format = OutputFormat::tfrecord;
    bool do_lower_case = true;
    int max_seq_length = 128;
    int max_predictions_per_seq = 20;
    int64_t random_seed = 12345;
    std::string random_seed_decimal;  // if non-empty: a seed of any size (Python ints are unbounded)
    int dupe_factor = 10;
    double masked_lm_prob = 0.15;
    double short_seq_prob = 0.1;
    // google-research/bert's --do_whole_word_mask: a word's WordPieces ("##" continuations joined
    // to the piece before) are masked together or not at all (MLPerf's copy of the script has no
    // such flag: single pieces, what false gives, byte for byte either script).
    bool do_whole_word_mask = false;
    void validate() const;  // Error naming the flag for values the reference cannot run with
};

// Documents as the reference's all_documents: sentences of token ids.
struct Corpus {
    std::vector<int32_t> tokens;           // all sentences back to back
    std::vector<uint64_t> sentence_end;    // sentence s = tokens[end[s-1], end[s])
    std::vector<uint32_t> doc_first;       // document d = sentences [doc_first[d], doc_first[d+1])
    uint64_t bytes_read = 0;
    size_t num_documents() const { return doc_first.empty() ? 0 : doc_first.size() - 1; }
};

// Reads text as the reference does (see pretraining_data.cpp) into a Corpus, file after file.
// Empty documents are removed by finish().
class CorpusBuilder {
public:
    // `threads` > 1 tokenizes chunks of at least `min_chunk_bytes` (split at '\n') in parallel;
    // the result is identical to threads = 1.
    CorpusBuilder(const Vocab& vocab, bool do_lower_case, int threads = 1,
                  size_t min_chunk_bytes = size_t(1) << 20);
    void add_text(std::string_view text);  // one file's contents
    void add_file(const std::string& path);
    Corpus finish();  // drops empty documents
    // Called with the input bytes tokenized so far, after each chunk (from worker threads too).
    // With a callback, one thread also works in chunks (64 MiB), so a large file reports progress.
    void set_progress(std::function<void(uint64_t bytes_done)> progress) {
        progress_ = std::move(progress);
    }

private:
    const Vocab& vocab_;
    bool lower_;
    int threads_;
    size_t min_chunk_;
    FullTokenizer tok_;
    Corpus c_;
    std::vector<uint32_t> docs_;  // first sentence of each (possibly empty) document
    std::function<void(uint64_t)> progress_;
};

struct Instances {
    // instance i: tokens[tok_off[i], tok_off[i+1]) with masks applied; the first a_len[i] + 2
    // tokens have segment id 0; masked positions/labels in [mask_off[i], mask_off[i+1]).
    std::vector<int32_t> tokens;
    std::vector<uint64_t> tok_off{0};
    std::vector<uint16_t> a_len;  // max_seq_length <= 65535
    std::vector<uint8_t> is_random_next;
    std::vector<int32_t> mask_pos, mask_label;
    std::vector<uint64_t> mask_off{0};
    std::vector<uint32_t> order;  // output order (after the final shuffle)
    size_t size() const { return a_len.size(); }
};

// create_training_instances(): shuffles the documents, makes dupe_factor passes, shuffles the
// instances (into `order`).
Instances create_training_instances(const Corpus& corpus, const Vocab& vocab,
                                    const PretrainingConfig& cfg, PyRandom& rng);

struct PretrainingResult {
    uint64_t instances = 0, documents = 0, sentences = 0, tokens = 0, bytes_in = 0, bytes_out = 0;
    double seconds_read = 0, seconds_generate = 0, seconds_write = 0;
};

// The whole script: input files -> output files (round-robin; HDF5 files are written whole at the
// end, each holding its records in the same order as the TFRecord would). If `reference_log` is non-null,
// the reference's stderr lines (INFO:tensorflow:..., first 20 instances) are appended to it.
PretrainingResult create_pretraining_data(const std::vector<std::string>& input_files,
                                          const std::vector<std::string>& output_files,
                                          const Vocab& vocab, const PretrainingConfig& cfg,
                                          std::string* reference_log, int threads = 1,
                                          bool show_progress = false);
// show_progress: a progress line (read+tokenize MB/s and ETA, then generation, then writing) on
// stderr, erased at the end on a terminal; the reference's lines are unaffected.

}  // namespace bertbench::data
