// Shard mode of `bertbench prepare`: each input file becomes one output TFRecord, produced
// exactly as a separate create_pretraining_data.py run on that one file with the same flags and
// seed would produce it. Shards run in parallel on worker threads (each with its own tokenizer
// and RNG; the vocabulary is shared read-only), so memory is bounded by `jobs` shards.
// A finished shard gets "<output>.meta.json" (input size/mtime, config, vocabulary fingerprint,
// output size and record count); a rerun skips a shard only if all of these still match and the
// output's records pass their CRC checks (HDF5: every dataset reads and checks); otherwise the
// shard is rewritten.
#pragma once

#include <string>
#include <vector>

#include "data/pretraining_data.hpp"

namespace bertbench::data {

struct ShardJob {
    std::string input, output;
};

// Lists the regular, non-hidden files of `input_dir` (sorted) and maps each to
// output_dir/<name without its last extension><extension> (".tfrecord", or ".hdf5" for
// --output_format=hdf5). Error on duplicate output names, and on a stem so long that the shard's
// sidecar "<output>.meta.json" would exceed NAME_MAX, on an output (or sidecar) name that is a
// directory, and on one that is an input or a file of `also_read` (the vocabulary) under another
// name (a symbolic or hard link): before any shard is made.
std::vector<ShardJob> plan_shards(const std::string& input_dir, const std::string& output_dir,
                                  const std::string& extension = ".tfrecord",
                                  const std::vector<std::string>& also_read = {});

// The shards in `output_dir` (a "<output>.meta.json" beside its output) that no input of `plan`
// makes: an earlier run's, of an input since renamed or removed, which a run over the directory
// would also read. Sorted.
std::vector<std::string> orphan_shards(const std::vector<ShardJob>& plan, const std::string& output_dir,
                                       const std::string& extension);

// The shards one rank of `mpirun -np ranks bertbench prepare` writes: the plan's shards, largest
// input first, each to the rank with the fewest input bytes so far (ties: the lower rank), so
// ranks get about equal bytes and every rank computes the same split from the same listing.
// Returned in plan order. Outputs do not depend on the split (each shard is its own run).
std::vector<ShardJob> shards_of_rank(const std::vector<ShardJob>& plan, int rank, int ranks);

// Input names and sizes of a plan as one string; ranks compare it to be sure they split the same
// listing (a non-shared or changing --input_dir would split differently).
std::string plan_fingerprint(const std::vector<ShardJob>& plan);

struct ShardSummary {
    size_t shards = 0, skipped = 0;
    uint64_t instances = 0, bytes_in = 0, bytes_out = 0;
    double seconds = 0;
};

// Progress lines (and the final summary line) start with `label`; an empty label: no lines.
ShardSummary run_shards(const std::vector<ShardJob>& jobs, const Vocab& vocab,
                        const PretrainingConfig& cfg, int threads, bool overwrite,
                        const std::string& label = "prepare");

}  // namespace bertbench::data
