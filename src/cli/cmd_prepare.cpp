// `bertbench prepare`: create_pretraining_data.py with the same flags, defaults and output bytes
// (MLPerf cleanup_scripts copy). stderr carries exactly the reference's INFO:tensorflow lines (also
// written to --log_file); --verbose adds a timing line. Shard mode: --input_dir/--output_dir/--jobs.
// Under `mpirun -np N`, shard mode splits the shards across the ranks (data::shards_of_rank; each
// rank still runs --jobs threads); every output is the same bytes as a one-process run's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.hpp"
#include "cli/reference_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/pyrandom.hpp"
#include "data/pretraining_data.hpp"
#include "data/pretraining_shards.hpp"
#include "dist/comm.hpp"

namespace bertbench::cli {

int cmd_prepare(int argc, char** argv) {
    std::string input_file, output_file, vocab_file, input_dir, output_dir, log_file;
    data::PretrainingConfig cfg;
    int jobs = 1;
    bool overwrite = false, verbose = false;
    Flags flags("prepare",
                "Create masked-LM/next-sentence pretraining TFRecords from one-sentence-per-line "
                "text, byte-identical to MLPerf's create_pretraining_data.py for the same flags.");
    flags.add("input_file", &input_file, "Input raw text file (or comma-separated list of files and globs).");
    flags.add("output_file", &output_file, "Output TFRecord file (or comma-separated list, written round-robin).");
    std::string output_format = "tfrecord";
    flags.add("output_format", &output_format, "tfrecord (the reference's output) or hdf5 (the same records as NVIDIA DeepLearningExamples' HDF5 shards; output names must end in .hdf5 or .h5).");
    flags.add("vocab_file", &vocab_file, "The vocabulary file that the BERT model was trained on.");
    flags.add("do_lower_case", &cfg.do_lower_case, "Lower-case and strip accents (True for uncased models).");
    flags.add("max_seq_length", &cfg.max_seq_length, "Maximum sequence length (tokens).");
    flags.add("max_predictions_per_seq", &cfg.max_predictions_per_seq, "Maximum number of masked LM predictions per sequence.");
    std::string seed_text = "12345";
    flags.add("random_seed", &seed_text, "Random seed for data generation (an integer of any size, as Python's random.Random(seed)).");
    flags.add("dupe_factor", &cfg.dupe_factor, "Number of times to duplicate the input data (with different masks).");
    flags.add("masked_lm_prob", &cfg.masked_lm_prob, "Masked LM probability.");
    flags.add("short_seq_prob", &cfg.short_seq_prob, "Probability of creating sequences shorter than the maximum length.");
    flags.add("input_dir", &input_dir, "Shard mode: every file in this directory is one shard.");
    flags.add("output_dir", &output_dir, "Shard mode: shard <name>.<ext> is written to <output_dir>/<name>.tfrecord (.hdf5 with --output_format=hdf5).");
    flags.add("jobs", &jobs, "Worker threads: shards in parallel (shard mode) or tokenization threads (0 = all CPUs).");
    flags.add("overwrite", &overwrite, "Shard mode: rewrite shards even if verified complete.");
    flags.add("log_file", &log_file, "Also write the reference's log lines (its stderr) to this file.");
    flags.add("verbose", &verbose, "Progress lines while working (also without a terminal) and, after the reference's log lines, a timing line (MB/s, phases).");
    flags.add("do_whole_word_mask", &cfg.do_whole_word_mask,
              "Whether to use whole word masking rather than per-WordPiece masking (google-research/"
              "bert's flag; MLPerf's script has none: False).");
    TokenizationFlags tokenization;
    tokenization.add(flags);
    if (!flags.parse(argc, argv)) return 0;
    tokenization.check();
    install_temporary_cleanup();  // a stop by signal removes the outputs' temporaries (no GEMM runs here)
    cfg.output_format = data::parse_output_format(output_format);
    if (verbose) log::info("prepare: config {}", flags.to_json().dump());
    if (jobs < 0) fail("--jobs: expected >= 0 (0 = all CPUs), got {}", jobs);
    if (jobs == 0) jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    {
        // absl's IntegerParser: "0x10", "1_000" and " 7 " are integers too (16, 1000, 7).
        std::string decimal;
        if (!python_int_decimal(seed_text, &decimal))
            fail("--random_seed: expected an integer, got \"{}\"", seed_text);
        PyRandom check;
        check.seed_decimal(decimal);
        cfg.random_seed_decimal = decimal;
    }
    if (vocab_file.empty()) fail("--vocab_file is required (the WordPiece vocab.txt of the model)");
    if (!log_file.empty()) check_output_file_writable(log_file, "--log_file");  // written at the end
    cfg.validate();
    const data::Vocab vocab = data::Vocab::load(vocab_file);

    const bool shard_mode = !input_dir.empty() || !output_dir.empty();
    dist::Comm& comm = dist::world();
    if (shard_mode) {
        if (input_dir.empty() || output_dir.empty())
            fail("--input_dir and --output_dir go together (shard mode); got only --{}",
                 input_dir.empty() ? "output_dir" : "input_dir");
        if (!input_file.empty() || !output_file.empty())
            fail("--input_file/--output_file cannot be combined with --input_dir/--output_dir");
        if (!log_file.empty())
            fail("--log_file={}: expected with --input_file/--output_file; shard mode "
                 "(--input_dir) keeps no reference log (one run per shard, their lines not "
                 "collected)", log_file);
        for (const char* t : {"[CLS]", "[SEP]", "[MASK]", "[UNK]"}) vocab.require(t);
        if (comm.size() > 1) {  // one dataset: every rank's shards made with the same settings
            nlohmann::json same = nlohmann::json::object();
            const nlohmann::json given = flags.to_json();
            for (const auto& [name, value] : given.items())
                if (name != "jobs" && name != "verbose") same["--" + name] = value;
            dist::require_same_json_on_all_ranks(comm, same, "flags",
                                                 "start every rank with the same command line (--jobs may differ)");
        }
        const auto t0 = std::chrono::steady_clock::now();
        const std::string extension = data::output_extension(cfg.output_format);
        const auto plan = data::plan_shards(input_dir, output_dir, extension, {vocab_file});
        if (comm.is_root())
            if (const auto orphans = data::orphan_shards(plan, output_dir, extension);
                !orphans.empty())
                log::warn("--output_dir={}: {} shard(s) there no file of --input_dir makes now (its input renamed or "
                          "removed), e.g. {}: a run over the directory reads them too (remove them, with their "
                          ".meta.json, if they are not wanted)", output_dir, orphans.size(), orphans.front());
        // dead processes' temporaries of this run's outputs only: other runs (other hosts) may
        // write into --output_dir too
        std::vector<std::string> outputs;
        for (const data::ShardJob& job : plan)
            for (const std::string& out : {job.output, job.output + ".meta.json"})
                outputs.push_back(std::filesystem::path(out).filename().string());
        if (comm.size() > 1) {  // each rank lists --input_dir itself: all must split the same listing
            const std::string listing = data::plan_fingerprint(plan);
            dist::require_same_on_all_ranks(
                comm,
                fmt::format("{} files, hash {:016x}", plan.size(),
                            dist::fnv1a64(listing.data(), listing.size())),
                "the --input_dir listing (file names and sizes)",
                "every rank must see the same --input_dir and --output_dir: a shared file system, "
                "or identical copies at the same path on every host");
            dist::require_shared_directory(comm, output_dir, "output_dir");  // not one per host
        }
        if (comm.size() == 1) {
            remove_stale_temporaries(output_dir, outputs);
            log::info("prepare: {} shards from {} -> {}, {} jobs", plan.size(), input_dir, output_dir, jobs);
            data::run_shards(plan, vocab, cfg, jobs, overwrite);
            return 0;
        }
        // mpirun -np N: rank 0 removes dead processes' temporaries before any rank writes; each
        // rank writes its share; progress comes from rank 0 (its own shards), the total at the end.
        if (comm.is_root()) remove_stale_temporaries(output_dir, outputs);
        comm.barrier();
        const auto mine = data::shards_of_rank(plan, comm.rank(), comm.size());
        if (comm.is_root())
            log::info("prepare: {} shards from {} -> {}, {} ranks x {} jobs", plan.size(),
                      input_dir, output_dir, comm.size(), jobs);
        const auto s = data::run_shards(
            mine, vocab, cfg, jobs, overwrite,
            comm.is_root() ? fmt::format("prepare: rank 0 of {}", comm.size()) : std::string());
        // A rank done early sleeps while it waits: a blocking collective would spin on a core
        // that ranks still working on this node need.
        dist::idle_barrier(comm);
        const int64_t skipped = comm.sum(static_cast<int64_t>(s.skipped));
        const int64_t instances = comm.sum(static_cast<int64_t>(s.instances));
        const int64_t bytes_in = comm.sum(static_cast<int64_t>(s.bytes_in));
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (comm.is_root())
            log::info("prepare: {} shards on {} ranks ({} skipped as verified complete), {} "
                      "instances, {:.1f} MB in {:.2f} s = {:.1f} MB/s",
                      plan.size(), comm.size(), skipped, instances, bytes_in / 1e6, seconds,
                      seconds > 0 ? bytes_in / 1e6 / seconds : 0.0);
        return 0;
    }
    if (comm.size() > 1)
        fail("--input_file/--output_file under mpirun ({} ranks) would have every rank write the "
             "same files (hint: shard mode, --input_dir/--output_dir, splits the shards across "
             "ranks; or run one process)",
             comm.size());
    if (input_file.empty()) fail("--input_file is required (text file(s), comma-separated, globs allowed)");
    if (output_file.empty()) fail("--output_file is required (TFRecord file(s), comma-separated)");
    const auto inputs = expand_globs(input_file, "--input_file", GlobOrder::directory);  // as tf.gfile.Glob
    const auto outputs = split_commas(output_file);
    // The reference splits on every comma and would fail writing the empty name; dropping the
    // item instead would silently change the round-robin.
    if (outputs.size() != static_cast<size_t>(std::count(output_file.begin(), output_file.end(), ',')) + 1)
        fail("--output_file={}: expected a comma list of paths, found an empty item (a comma at the "
             "start or end, or two together)", output_file);
    // Nothing is written before every output is known not to be an input.
    std::vector<std::string> written = outputs;
    if (!log_file.empty()) written.push_back(log_file);
    std::vector<std::pair<std::string, std::string>> named;
    for (const auto& out : outputs) named.emplace_back("--output_file", out);
    named.emplace_back("--log_file", log_file);
    check_outputs_distinct(named);
    for (const auto& out : written) {
        const std::string flag = out == log_file ? "--log_file" : "--output_file";
        check_output_not_input(out, flag, inputs, "--input_file");
        check_output_not_input(out, flag, {vocab_file}, "--vocab_file");
        if (out != log_file) check_output_file_writable(out, flag);  // before the corpus is read
        const std::filesystem::path p(out);
        remove_stale_temporaries(p.parent_path().string(), p.filename().string());
    }
    std::string ref_log;
    // Progress on a terminal (erased when done), or with --verbose; never in a plain run's
    // stderr, which is exactly the reference's lines.
    const auto r = data::create_pretraining_data(inputs, outputs, vocab, cfg, &ref_log, jobs,
                                                 log::stderr_is_terminal() || verbose);
    std::fwrite(ref_log.data(), 1, ref_log.size(), stderr);
    if (!log_file.empty()) try {
        write_file_atomic(log_file, ref_log);
    } catch (...) {
        // an error, so no output under its name (the docs' promise): this run's files go again
        for (const auto& out : outputs) {
            bool stream = false;
            const std::string target = output_target(out, &stream);
            if (!stream) std::remove(target.c_str());
        }
        throw;
    }
    if (r.instances == 0)
        log::warn("prepare: the input has no documents with tokens; wrote {} empty file(s), as the "
                  "reference does", outputs.size());
    const double total = r.seconds_read + r.seconds_generate + r.seconds_write;
    if (verbose)
        log::info("prepare: {} instances from {:.2f} MB ({} documents, {} tokens) in {:.3f} s "
              "(read+tokenize {:.3f}, generate {:.3f}, write {:.3f}) = {:.1f} MB/s",
              r.instances, r.bytes_in / 1e6, r.documents, r.tokens, total, r.seconds_read,
              r.seconds_generate, r.seconds_write, total > 0 ? r.bytes_in / 1e6 / total : 0.0);
    return 0;
}

}  // namespace bertbench::cli
