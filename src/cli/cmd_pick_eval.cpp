// `bertbench pick-eval`: MLPerf cleanup_scripts/pick_eval_samples.py. Output record k is input
// record int(k * (N / K)) (double arithmetic, as Python does; integer floor(k*N/K) differs, e.g.
// N=516 K=111 k=37), parsed with the FixedLenFeature schema, cast int64 -> int32 (as the reference
// does with tf.to_int32) and re-encoded with exactly the 7 MLPerf features in the reference order.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::cli {
namespace {

void to_int32(std::vector<int64_t>& v) {
    for (auto& x : v) x = static_cast<int32_t>(x);  // tf.to_int32 keeps the low 32 bits
}

}  // namespace

int cmd_pick_eval(int argc, char** argv) {
    std::string input_tfrecord, output_tfrecord;
    int num_examples_to_pick = 10000, max_seq_length = 512, max_predictions_per_seq = 76;
    bool skip_corrupt_records = false;
    Flags flags("pick-eval",
                "Pick an evenly spaced subset of a pretraining TFRecord as the eval set "
                "(MLPerf pick_eval_samples.py; byte-identical output).");
    flags.add("input_tfrecord", &input_tfrecord, "input TFRecord path");
    flags.add("output_tfrecord", &output_tfrecord, "output TFRecord path (written atomically)");
    flags.add("num_examples_to_pick", &num_examples_to_pick, "number of examples to pick");
    flags.add("max_seq_length", &max_seq_length, "tokens per sequence in the input (schema check)");
    flags.add("max_predictions_per_seq", &max_predictions_per_seq,
              "masked-LM predictions per sequence in the input (schema check)");
    flags.add("skip_corrupt_records", &skip_corrupt_records,
              "skip records whose CRC does not match instead of failing (not in the reference)");
    if (!flags.parse(argc, argv)) return 0;
    install_temporary_cleanup();  // a stop by signal removes the outputs' temporaries (no GEMM runs here)
    if (input_tfrecord.empty()) fail("--input_tfrecord: expected a path, got nothing");
    if (output_tfrecord.empty()) fail("--output_tfrecord: expected a path, got nothing");
    if (io::is_hdf5_path(output_tfrecord))
        fail("--output_tfrecord={}: expected a name not ending in .hdf5 or .h5 (it writes TFRecords; "
             "readers choose the format by extension)", output_tfrecord);
    if (num_examples_to_pick <= 0)
        fail("--num_examples_to_pick: expected a positive count, got {}", num_examples_to_pick);
    if (max_seq_length <= 0) fail("--max_seq_length: expected > 0, got {}", max_seq_length);
    // 0: records without masked positions (create_pretraining_data.py --max_predictions_per_seq=0)
    if (max_predictions_per_seq < 0)
        fail("--max_predictions_per_seq: expected >= 0, got {}", max_predictions_per_seq);

    check_output_file_writable(output_tfrecord, "--output_tfrecord");  // named now, not by the writer after the count
    check_output_not_input(output_tfrecord, "--output_tfrecord", {input_tfrecord},
                           "--input_tfrecord");
    {
        const std::filesystem::path out(output_tfrecord);
        remove_stale_temporaries(out.parent_path().string(), out.filename().string());
    }

    const auto tic = std::chrono::steady_clock::now();
    // Pass 1 counts the records; pass 2 streams and picks (the picked indices never decrease),
    // so memory stays at one record however large the input is. The counting pass reads the whole
    // file, so it is the one that says the skipped records (pass 2 may stop before a corrupt tail).
    const uint64_t n = io::count_tfrecords(input_tfrecord, skip_corrupt_records, /*say_skips=*/true);
    if (n == 0) fail("--input_tfrecord {}: expected at least one record, got none", input_tfrecord);
    const double pick_ratio = static_cast<double>(n) / static_cast<double>(num_examples_to_pick);
    if (static_cast<uint64_t>(num_examples_to_pick) > n)
        log::warn("--num_examples_to_pick={}: more than the {} records of {}; records repeat (output "
                  "record k is input record int(k * {}/{}), as pick_eval_samples.py does)",
                  num_examples_to_pick, n, input_tfrecord, n, num_examples_to_pick);

    io::TfRecordReader reader(input_tfrecord, skip_corrupt_records, /*say_skips=*/false);
    io::TfRecordWriter writer(output_tfrecord);
    std::string payload;
    uint64_t have = 0;  // records read so far; `payload` holds record have-1
    io::PretrainingRecord rec;
    std::string out;
    for (int k = 0; k < num_examples_to_pick; ++k) {
        const auto want = static_cast<uint64_t>(static_cast<double>(k) * pick_ratio);
        BB_CHECK(want < n);
        while (have <= want) {
            if (!reader.next(payload))
                fail("{}: ended after {} records while reading record {} (changed while reading?)",
                     input_tfrecord, have, want);
            ++have;
        }
        const std::string where = fmt::format("{}: record {}", input_tfrecord, want);
        io::parse_pretraining_example(io::decode_example(payload, where), max_seq_length,
                                      max_predictions_per_seq, where, rec);
        to_int32(rec.input_ids);
        to_int32(rec.input_mask);
        to_int32(rec.segment_ids);
        to_int32(rec.masked_lm_positions);
        to_int32(rec.masked_lm_ids);
        rec.next_sentence_labels = static_cast<int32_t>(rec.next_sentence_labels);
        out.clear();
        io::encode_example(io::pretraining_example(rec), out);
        writer.write(out);
    }
    writer.close();
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - tic).count();
    // The reference's one line, as its logging prints it (the golden eval_pick/*.log)
    std::fputs(fmt::format("INFO:root:Picked {} examples out of {} samples in {:.2f} sec\n",
                           num_examples_to_pick, n, sec).c_str(), stderr);
    return 0;
}

}  // namespace bertbench::cli
