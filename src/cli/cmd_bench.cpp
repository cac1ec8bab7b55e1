// `bertbench bench`: throughput, latency and model-FLOP utilisation of BERT training and inference
// (--task=pretraining: the pretraining model; --task=squad: the SQuAD span model) on synthetic
// full-length batches or real unpadded TFRecord batches (--data); a per-op profile
// (--profile); the machine's GEMM/FMA ceilings (--mode=gemm). Every axis takes a comma list; the
// points of the cartesian product run one after another; an impossible point is reported and
// skipped. Reports: table/md/csv/json on stdout, PerfZero-style JSON, SVG plots. docs/benchmark.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <tuple>

#include "bench/ceiling.hpp"
#include "bench/device_gemm.hpp"
#include "bench/mpi_point.hpp"
#include "bench/report.hpp"
#include "bench/runner.hpp"
#include "cli/bench_scenario.hpp"
#include "cli/commands.hpp"
#include "cli/device_flag.hpp"
#include "cli/precision_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
#include "model/checkpoint.hpp"

namespace bertbench::cli {
namespace {

// A sweep's axis names each value once: a repeated one would run (and report) its points twice.
template <typename T>
void require_each_once(const std::vector<T>& values, const std::string& flag) {
    for (size_t k = 0; k < values.size(); ++k)
        if (std::count(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values[k]))
            fail("--{}: expected each value once, got {} twice", flag, fmt::format("{}", values[k]));
}

std::vector<int> int_list(const std::string& text, const std::string& flag) {
    std::vector<int> out;
    for (const std::string& item : split_list(text, flag)) {
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || v <= 0 || v > 1'000'000)
            fail("--{}: expected integers 1 .. 1000000 separated by commas, got \"{}\"", flag, item);
        out.push_back(static_cast<int>(v));
    }
    if (out.empty()) fail("--{}: expected at least one value", flag);
    require_each_once(out, flag);
    return out;
}

const char* gemm_name(ops::Precision d) {
    return d == ops::Precision::bf16 ? "bf16 GEMM" : d == ops::Precision::int8 ? "int8 GEMM" : "sgemm";
}
// int8 products count integer operations
const char* gemm_unit(ops::Precision d) { return d == ops::Precision::int8 ? "GOP/s" : "GFLOP/s"; }

// oneDNN's kernel behind the ceiling of a bf16 or int8 GEMM ("" for sgemm).
std::string gemm_impl(ops::Precision d) {
    return d == ops::Precision::bf16 ? ops::bf16_gemm_impl() : d == ops::Precision::int8 ? ops::int8_gemm_impl() : "";
}

// `model`: whose linear shapes were timed (the MFU ceilings: BERT-base's).
nlohmann::json ceiling_json(const bench::Ceiling& ceil, int tokens, const std::string& model) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const auto& g : ceil.gemms)
        shapes.push_back({{"role", g.shape.role},
                          {"m", g.shape.m},
                          {"n", g.shape.n},
                          {"k", g.shape.k},
                          {"count", g.shape.count},
                          {"gflops_median", g.gflops_median},
                          {"gflops_max", g.gflops_max}});
    nlohmann::json j = {{"mode", "gemm"},
                        {"threads", ceil.threads},
                        {"dtype", ops::precision_name(ceil.dtype)},
                        {"tokens", tokens},
                        {"model", model},
                        {"fma_peak_gflops", ceil.fma_peak_gflops},
                        {"gemm_gflops", ceil.gemm_gflops},
                        {"shapes", shapes}};
    if (ceil.dtype == ops::Precision::fp32) j["sgemm_gflops"] = ceil.gemm_gflops;
    if (ceil.dtype != ops::Precision::fp32) j["gemm_impl"] = gemm_impl(ceil.dtype);
    return j;
}

// The ceilings, each as a text line (and its shapes) to `text` and a JSON point; a thread count
// beyond the CPUs is given to `skip` (why) and left out.
nlohmann::json run_gemm(const std::vector<int>& threads, const std::string& model, const model::BertConfig& c,
                        int tokens,
                        int reps, const std::vector<ops::Precision>& dtypes, std::ostream& text,
                        const std::function<void(const std::string&)>& skip) {
    nlohmann::json out = nlohmann::json::array();
    for (ops::Precision d : dtypes)
    for (int t : threads) {
        if (t > sysinfo::cpus_available()) {
            skip(fmt::format("--threads={}: only {} CPUs available", t, sysinfo::cpus_available()));
            continue;
        }
        const bench::Ceiling ceil =
            bench::measure_ceiling(t, tokens, c.hidden_size, c.intermediate_size, reps, d);
        text << fmt::format(
            "threads {}: FMA peak (fp32) {:.1f} GFLOP/s, {} on BERT linear shapes "
            "({} tokens, H {}, I {}) {:.1f} {}{}{}\n",
            t, ceil.fma_peak_gflops, gemm_name(d), tokens, c.hidden_size, c.intermediate_size,
            ceil.gemm_gflops, gemm_unit(d),
            // integer operations are no share of a floating-point peak
            d == ops::Precision::int8
                ? std::string()
                : fmt::format(" ({:.0f}% of the fp32 FMA peak)", 100 * ceil.gemm_gflops / ceil.fma_peak_gflops),
            d == ops::Precision::fp32 ? "" : "; kernel: " + gemm_impl(d));
        for (const auto& g : ceil.gemms)
            text << fmt::format(
                "  {:<26} M {:>5} N {:>5} K {:>5}  x{}  median {:7.1f}  best "
                "{:7.1f} {}\n",
                g.shape.role, g.shape.m, g.shape.n, g.shape.k, g.shape.count, g.gflops_median,
                g.gflops_max, gemm_unit(d));
        out.push_back(ceiling_json(ceil, tokens, model));
    }
    return out;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    const auto t_start = std::chrono::steady_clock::now();
    std::string mode = "train", model_list = "base", config_file, json_path, format = "table";
    std::string seq_lens = "128", batch_sizes = "8", thread_list, spu_list = "1", data;
    std::string plot_path, profile_svg_path = "bench_profile.svg", md_path, dtype_list = "fp32";
    std::string task = "pretraining", squad_layout = "padded";
    int warmup = 2, steps = 10, gemm_tokens = 4096, gemm_reps = 5, max_predictions = 0;
    int ceiling_reps = 3, profile_steps = 3;
    double ceiling_gflops = 0, min_time = 0;
    bool measure_ceiling = true, profile = false, last_layer_subset = false;
    Flags flags(
        "bench",
        "Measure BERT training/inference throughput on synthetic full-length batches (or "
        "real unpadded ones, --data), or (--mode=gemm) this machine's FMA and sgemm "
        "ceilings. Comma lists sweep an axis.\n"
        "Definitions: a training step is steps_per_update x (forward + backward + global-norm "
        "clip) plus one LAMB update (included; --task=squad: AdamW); an inference step is one "
        "forward (dropout off). Warm-up steps are excluded; times are medians of the timed steps. gflops "
        "counts matmul FLOPs of real tokens (2 per multiply-add; backward = 2x forward); MFU "
        "= gflops / the GEMM ceiling of the point's dtype (sgemm, bf16 or int8; bench --mode=gemm) at the same "
        "thread count. docs/benchmark.md.");
    flags.add("task", &task,
              "pretraining | squad. pretraining: the pretraining model (MLM + NSP heads), LAMB. "
              "squad: the SQuAD span model (encoder + cls/squad dense H->2; run_squad.py's loss), "
              "training with optimization.py's AdamW, inference = encoder + span head; --data "
              "takes run_squad.py feature TFRecords (eval.tf_record / train.tf_record)");
    flags.add("squad_layout", &squad_layout,
              "--task=squad --data: padded = run_squad.py's computation (each feature's "
              "max_seq_length rows; padding rows are queries over the real keys) | real = the "
              "real tokens only (padding not computed)");
    flags.add("mode", &mode, "train | infer | gemm (comma list)");
    flags.add("last_layer_subset", &last_layer_subset,
              "--task=pretraining: the last layer's attention output and FFN only on the rows the "
              "heads read ([CLS] and masked positions; the same results to fp32 rounding)");
    DeviceFlag device;
    device.add(flags);
    flags.add("dtype", &dtype_list,
              "GEMM precision(s): fp32 | bf16 | int8 (comma list; bf16 = bf16 operands, fp32 "
              "accumulation, fp32 master weights; emulated and slower where the CPU lacks "
              "AVX512-BF16/AMX; int8 = inference only: the encoder's and MLM head's dense layers and "
              "the attention's products in int8, weights per channel, activations per token; "
              "docs/engine.md). "
              "With --mode=gemm: the ceiling of each precision");
    flags.alias("precision", "dtype");  // Intel model zoo's spelling (fp32, bfloat16)
    flags.add("model", &model_list,
              "preset(s): tiny, mini, small, medium, base, large (comma list)");
    flags.add("bert_config_file", &config_file, "a bert_config.json instead of --model");
    flags.add("seq_len", &seq_lens,
              "sequence length(s), tokens (comma list); with --data: the "
              "records' max_seq_length; with --scenario the default is 384 (MLPerf's BERT)");
    flags.add("batch_size", &batch_sizes, "sequences per micro-batch (comma list)");
    flags.add("threads", &thread_list, "thread count(s) (comma list; default: all available CPUs)");
    flags.add("steps_per_update", &spu_list,
              "micro-batches per optimizer update, train (comma list)");
    flags.add("warmup", &warmup, "untimed warm-up steps per point");
    flags.add("steps", &steps, "timed steps per point (at least)");
    flags.add("min_time", &min_time,
              "seconds: keep timing steps past --steps until the timed steps add up to this (a "
              "median of a few 50 ms steps moves with every hiccup of a shared host)");
    flags.add("data", &data,
              "glob(s) of MLPerf-schema pretraining TFRecords or NVIDIA HDF5 shards (.hdf5/.h5); "
              "with --task=squad, run_squad.py feature TFRecords: run on their real unpadded "
              "sequences (fixed order, cycled) instead of synthetic batches");
    bool skip_corrupt_records = false;
    flags.add("skip_corrupt_records", &skip_corrupt_records,
              "--data: skip TFRecord records whose length or CRC does not match instead of "
              "stopping");
    flags.add("max_predictions", &max_predictions,
              "masked positions per sequence (0: 20 at seq "
              "128, 76 at 512, proportional)");
    flags.add("ceiling", &measure_ceiling,
              "measure the sgemm ceiling once per thread count (BERT-base "
              "linear shapes, 4096 tokens) and report MFU");
    flags.add("ceiling_gflops", &ceiling_gflops,
              "use this ceiling (GFLOP/s; int8: GOP/s) for MFU instead of measuring it (every "
              "thread count; one --dtype)");
    flags.add("ceiling_reps", &ceiling_reps, "repetitions per GEMM shape of the MFU ceiling");
    flags.add("gemm_tokens", &gemm_tokens, "rows (tokens) of the GEMMs timed by --mode=gemm");
    flags.add("gemm_reps", &gemm_reps, "repetitions per GEMM shape for --mode=gemm");
    flags.add("profile", &profile, "also profile every point: per-op time share, GFLOP/s, GB/s");
    flags.add("profile_steps", &profile_steps, "steps averaged by --profile (after one warm-up)");
    flags.add("profile_svg", &profile_svg_path, "bar chart of the --profile breakdown ('' = none)");
    flags.add("format", &format, "stdout report: table | md | csv | json");
    flags.add("json", &json_path,
              "write a PerfZero-style JSON summary (points, ceilings, profiles, "
              "system, process and build info, definitions) to this file (rewritten after every point: "
              "benchmark_result.complete is false until the sweep ends)");
    flags.add("plot", &plot_path, "write an SVG of sequences/s against batch size per model");
    flags.add("md", &md_path,
              "write the Markdown reproduction table (rows: threads; columns: "
              "model, seq_len, batch size) to this file");
    // Under mpirun -np N (docs/distributed.md): --batch_size is the global batch, the pretraining
    // point runs data-parallel (bench/mpi_point.hpp), rank 0 alone prints and writes files.
    bench::MpiOptions mpi_opts;
    flags.add("allreduce_overlap", &mpi_opts.overlap,
              "under mpirun: start the gradient all-reduce during the backward (false: after it)");
    flags.add("bucket_mb", &mpi_opts.bucket_mb, "under mpirun: gradient all-reduce bucket, MiB");
    flags.add("scaling_baseline", &mpi_opts.baseline,
              "under mpirun: first time rank 0 alone at the per-rank batch, for the scaling "
              "efficiency");
    ScenarioOptions scenario;  // --scenario / --summarize_log: cli/bench_scenario.hpp
    scenario.add(flags);
    if (!flags.parse(argc, argv)) return 0;
    // The files written at the end: each writable and a different file, before the work.
    const std::vector<std::pair<std::string, std::string>> outputs = {
        {"--json", json_path},         {"--plot", plot_path},
        {"--md", md_path},             {"--profile_svg", profile ? profile_svg_path : ""},
        {"--scenario_log", scenario.log_path}, {"--schedule_out", scenario.schedule_out},
        {"--accuracy_log", scenario.accuracy_log}, {"--mlperf_summary", scenario.mlperf_summary}};
    for (const auto& [flag, path] : outputs)
        if (!path.empty()) check_output_file_writable(path, flag);
    check_outputs_distinct(outputs);
    // ... and none of them a file the run reads
    for (const auto& [in_flag, list] : std::vector<std::pair<std::string, std::string>>{
             {"--data", data},
             {"--bert_config_file", config_file},
             {"--init_checkpoint", scenario.init_checkpoint},
             {"--predict_file", scenario.predict_file},
             {"--vocab_file", scenario.vocab_file},
             {"--summarize_log", scenario.summarize_log}}) {
        const std::vector<std::string> files = model::files_read({list});  // a TF checkpoint's every file
        for (const auto& [flag, path] : outputs)
            if (!path.empty()) check_output_not_input(path, flag, files, in_flag);
    }
    if (!config_file.empty() && flags.is_set("model"))
        fail("--bert_config_file and --model: expected one of them, got both");
    scenario.refuse_unused();
    dist::Comm& comm = dist::world();
    if (comm.size() > 1) {
        if (scenario.active())
            fail("--{}: one process (the scenarios' system under test is one bertbench, as LoadGen's); got "
                 "mpirun -np {} (hint: run it without mpirun)",
                 scenario.summarize_log.empty() ? "scenario" : "summarize_log", comm.size());
        // One measurement: every rank the same flags (--threads aside, as pretrain's: Intel's
        // launcher splits a node's cores unevenly) and model config; a rank timing more steps or
        // another model would wait in a collective the others never reach, or add other work to
        // the job's totals.
        nlohmann::json same = nlohmann::json::object();
        const nlohmann::json given = flags.to_json();
        for (const auto& [name, value] : given.items())
            if (name != "threads") same["--" + name] = value;
        if (!config_file.empty()) same["bert_config.json"] = model::BertConfig::from_json_file(config_file).to_json();
        dist::require_same_json_on_all_ranks(comm, same, "flags and model config",
                                             "start every rank with the same command line and bert_config.json");
        for (int b : int_list(batch_sizes, "batch_size")) dist::local_batch(b, comm.size(), "batch_size");
    }
    if (scenario.active()) {
        // bench's sweep flags that a scenario run does not use: an error, not a silent no-op
        for (const char* name : {"mode", "last_layer_subset", "steps_per_update", "warmup", "steps", "min_time",
                                 "max_predictions", "ceiling", "ceiling_gflops", "ceiling_reps", "gemm_tokens",
                                 "gemm_reps", "profile", "profile_steps", "profile_svg", "format", "md",
                                 "allreduce_overlap", "bucket_mb", "scaling_baseline"})
            if (flags.is_set(name))
                fail("--{}: not used by a scenario run (--scenario/--summarize_log: its report goes to --json, "
                     "its summary to --mlperf_summary, a server run's latency plot to --plot)",
                     name);
        ScenarioContext sc;
        sc.model = model_list, sc.bert_config_file = config_file, sc.dtype = dtype_list;
        sc.threads = thread_list.empty() ? std::to_string(sysinfo::cpus_available()) : thread_list;
        sc.batch_size = batch_sizes, sc.json_path = json_path, sc.plot_path = plot_path;
        // MLPerf Inference's BERT runs 384-token features (its QSL's max_seq_length)
        sc.seq_len = flags.is_set("seq_len") ? seq_lens : "384";
        // the scenarios' default layout is real: a query at its real length (padding not computed)
        sc.squad_layout = flags.is_set("squad_layout") ? squad_layout : "real";
        sc.task = task, sc.task_given = flags.is_set("task"), sc.model_given = flags.is_set("model");
        sc.skip_corrupt_records = skip_corrupt_records, sc.cuda = device.cuda(), sc.flags = flags.to_json();
        sc.flags["seq_len"] = sc.seq_len;  // the effective values, not the sweep's defaults
        sc.flags["squad_layout"] = sc.squad_layout;
        if (squad_layout != "padded" && squad_layout != "real")
            fail("--squad_layout: expected padded or real, got \"{}\"", squad_layout);
        if (scenario.summarize_log.empty()) {
            if (split_list(model_list, "model").size() != 1 && config_file.empty())
                fail("--model: --scenario takes one value (one report per run), got \"{}\"", model_list);
            sc.config = config_file.empty() ? model::BertConfig::preset(model_list)
                                            : model::BertConfig::from_json_file(config_file);
            if (!data.empty()) sc.data_files = expand_globs(data, "data");
        }
        return run_bench_scenario(scenario, sc);
    }
    if (comm.rank() != 0) {  // one report: rank 0's, with the job's totals
        if (std::freopen("/dev/null", "w", stdout) == nullptr) fail("cannot silence rank {}'s stdout", comm.rank());
        // and rank 0's warnings and progress only: another rank's repeat them about figures the
        // report does not give, and land in the middle of rank 0's output (errors still print)
        log::set_level(log::Level::error);
        json_path.clear(), plot_path.clear(), md_path.clear(), profile_svg_path.clear();
    }
    // --device=cuda: the GEMM ceiling, inference and training steps run on the GPU
    std::unique_ptr<backend::Backend> gpu;
    if (device.cuda()) {
        if (comm.is_mpi()) fail("--device=cuda: not under mpirun yet (one process per GPU needs NCCL: docs/gpu.md)");
        gpu = device.cuda_backend();
    }
    if (warmup < 0) fail("--warmup: expected >= 0, got {}", warmup);
    if (steps < 1) fail("--steps: expected >= 1, got {}", steps);
    if (!(min_time >= 0 && min_time <= 3600))
        fail("--min_time: expected 0..3600 seconds, got {}", min_time);
    if (profile_steps < 1) fail("--profile_steps: expected >= 1, got {}", profile_steps);
    if (ceiling_gflops < 0) fail("--ceiling_gflops: expected >= 0, got {}", ceiling_gflops);
    if (max_predictions < 0) fail("--max_predictions: expected >= 0, got {}", max_predictions);
    if (ceiling_reps < 1) fail("--ceiling_reps: expected >= 1, got {}", ceiling_reps);
    if (gemm_reps < 1) fail("--gemm_reps: expected >= 1, got {}", gemm_reps);
    if (gemm_tokens < 1 || gemm_tokens > (1 << 20))
        fail("--gemm_tokens: expected 1..1048576 rows, got {}", gemm_tokens);
    if (task != "pretraining" && task != "squad")
        fail("--task: expected pretraining or squad, got \"{}\"", task);
    if (task == "squad" && comm.is_mpi())
        fail("--task=squad: the data-parallel benchmark under mpirun times the pretraining model "
             "only (hint: run --task=squad as one process)");
    if (squad_layout != "padded" && squad_layout != "real")
        fail("--squad_layout: expected padded or real, got \"{}\"", squad_layout);
    if (task == "squad" && last_layer_subset)
        fail("--last_layer_subset: applies to --task=pretraining (the span head reads every row)");
    const bench::Format fmt_out = bench::parse_format(format);
    // One document on stdout: CSV has no place for the profile's second table (JSON carries it in
    // its point)
    if (profile && fmt_out == bench::Format::csv)
        fail("--profile with --format=csv: expected one CSV document, and the profile is a second table "
             "(hint: --format=json carries each point's profile, --json=FILE and --profile_svg keep it beside "
             "the CSV)");
    const std::vector<std::string> modes = split_list(mode, "mode");
    if (modes.empty()) fail("--mode: expected at least one of train, infer, gemm, got \"{}\"", mode);
    for (const std::string& m : modes)
        if (m != "train" && m != "infer" && m != "gemm")
            fail("--mode: expected train, infer or gemm, got \"{}\"", m);
    require_each_once(modes, "mode");
    if ((fmt_out == bench::Format::csv || fmt_out == bench::Format::md) &&
        std::find(modes.begin(), modes.end(), "gemm") != modes.end())
        fail("--mode=gemm with --format={}: the point table has no columns for the GEMM ceilings (hint: "
             "--format=table or json, or --json=FILE beside the {})", format, format);
    // the Markdown table and the plot show points; GEMM ceilings alone would make them empty
    if (std::all_of(modes.begin(), modes.end(), [](const std::string& m) { return m == "gemm"; }))
        for (const auto& [flag, path] : {std::pair{"--md", md_path}, {"--plot", plot_path}})
            if (!path.empty())
                fail("{}={}: --mode=gemm measures ceilings, no points for its table or plot (hint: the ceilings "
                     "are on stdout and in --json=FILE)", flag, path);
    if (thread_list.empty()) thread_list = std::to_string(sysinfo::cpus_available());
    const std::vector<std::string> data_files =
        data.empty() ? std::vector<std::string>{} : expand_globs(data, "data");

    const std::vector<int> threads = int_list(thread_list, "threads");
    std::vector<ops::Precision> dtypes;
    for (const std::string& d : split_list(dtype_list, "dtype")) dtypes.push_back(ops::parse_precision(d, "dtype"));
    if (dtypes.empty()) fail("--dtype: expected at least one of fp32, bf16, int8");
    std::vector<std::string> dtype_names;
    for (ops::Precision d : dtypes) dtype_names.push_back(ops::precision_name(d));
    require_each_once(dtype_names, "dtype");  // by the name parsed: bf16 and bfloat16 are one
    // A flag that no point of this sweep uses: an error, not a silent no-op (as for a scenario run).
    const auto has_mode = [&](const char* m) { return std::count(modes.begin(), modes.end(), m) > 0; };
    const auto unused = [&](std::initializer_list<const char*> names, const std::string& why) {
        for (const char* name : names)
            if (flags.is_set(name)) fail("--{}: {}", name, why);
    };
    if (!has_mode("train") && !has_mode("infer"))  // gemm alone
        unused({"task", "squad_layout", "last_layer_subset", "seq_len", "batch_size", "steps_per_update", "warmup",
                "steps", "min_time", "data", "skip_corrupt_records", "max_predictions", "ceiling", "ceiling_gflops",
                "ceiling_reps", "profile", "profile_steps", "profile_svg"},
               "not used by --mode=gemm, which times the linear layers' products alone (--gemm_tokens rows, "
               "--gemm_reps repetitions)");
    if (!has_mode("train")) unused({"steps_per_update"}, "applies to --mode=train points, and this sweep has none");
    if (task == "pretraining") unused({"squad_layout"}, "applies to --task=squad");
    else unused({"max_predictions"}, "applies to --task=pretraining (a SQuAD feature has no masked positions)");
    if (data.empty())
        unused({"squad_layout", "skip_corrupt_records"},
               "applies to --data (synthetic batches are full length and well formed)");
    if (!profile) unused({"profile_steps", "profile_svg"}, "applies to --profile");
    if (!has_mode("gemm"))
        unused({"gemm_tokens", "gemm_reps"}, "applies to --mode=gemm (the MFU ceiling's are --ceiling_reps)");
    if (!comm.is_mpi())
        unused({"allreduce_overlap", "bucket_mb", "scaling_baseline"},
               "applies under mpirun (the data-parallel point, docs/distributed.md)");
    if (ceiling_gflops > 0) {  // 0: measure it (the default)
        if (!measure_ceiling) fail("--noceiling and --ceiling_gflops: expected one of them, got both");
        if (!(ceiling_gflops >= 1e-3 && ceiling_gflops <= 1e7))
            fail("--ceiling_gflops: expected 0.001 .. 1e7 GFLOP/s (0: measure it), got {:g}", ceiling_gflops);
        // one figure cannot be the sgemm's, the bf16 GEMM's and the int8 GEMM's ceiling at once
        if (dtypes.size() > 1)
            fail("--ceiling_gflops={:g}: one ceiling for a sweep over --dtype={} whose precisions each have "
                 "their own (hint: one --dtype per run, or let bench measure them)",
                 ceiling_gflops, dtype_list);
    }
    if (!measure_ceiling || ceiling_gflops > 0)
        unused({"ceiling_reps"}, "applies where bench measures the MFU ceiling (not with --noceiling or "
                                 "--ceiling_gflops)");
    // int8 training alone: refused before any output (in a sweep with other points, check_point
    // skips it with a warning)
    if (std::all_of(modes.begin(), modes.end(), [](const std::string& m) { return m == "train"; }) &&
        std::all_of(dtypes.begin(), dtypes.end(), [](ops::Precision p) { return p == ops::Precision::int8; }))
        bench::check_train_dtype(ops::Precision::int8);
    for (const ops::Precision p : dtypes) check_dtype(p, "dtype");  // what this CPU lacks, once consistent
    std::vector<std::pair<std::string, model::BertConfig>> models;
    if (!config_file.empty()) {
        models.emplace_back(config_file, model::BertConfig::from_json_file(config_file));
    } else {
        for (const std::string& name : split_list(model_list, "model"))
            models.emplace_back(name, model::BertConfig::preset(name));
    }
    if (models.empty()) fail("--model: expected at least one preset");
    std::vector<std::string> model_names;
    for (const auto& m : models) model_names.push_back(m.first);
    require_each_once(model_names, "model");
    if (has_mode("gemm") && models.size() > 1)
        fail("--model={}: --mode=gemm times one model's linear shapes, got {} models (hint: one --model "
             "per --mode=gemm run)",
             model_list, models.size());
    if (!sysinfo::is_optimized_build())
        log::warn("THIS IS NOT AN OPTIMIZED BUILD (Debug or sanitizer): its timings mean nothing");

    // The MFU ceiling: measured once per (thread count, dtype) in this run.
    std::map<std::pair<int, ops::Precision>, double> ceiling_cache;
    std::vector<nlohmann::json> ceilings;
    const auto ceiling_for = [&](int t, ops::Precision d) -> double {
        if (ceiling_gflops > 0) return ceiling_gflops;
        if (gpu) return bench::nominal_peak_gflops(gpu->describe(), d);  // 0 for a GPU it does not know
        if (!measure_ceiling) return 0;
        if (auto it = ceiling_cache.find({t, d}); it != ceiling_cache.end()) return it->second;
        log::info(
            "measuring the {} ceiling at {} thread(s) (BERT-base linear shapes, 4096 "
            "tokens; --ceiling_gflops=X skips this)",
            gemm_name(d), t);
        const auto base = model::BertConfig::preset("base");
        const bench::Ceiling c = bench::measure_ceiling(t, 4096, base.hidden_size,
                                                        base.intermediate_size, ceiling_reps, d);
        ceilings.push_back(ceiling_json(c, 4096, "base"));
        return ceiling_cache[{t, d}] = c.gemm_gflops;
    };

    std::vector<nlohmann::json> points, gemm_points, profiles_json;
    std::map<size_t, nlohmann::json> profile_of_point;  // --format=json prints each inside its point
    // A point faster than the ceiling means the probe ran in a slow minute (a shared host): probe
    // again and keep the higher; if the point still exceeds it, say so and why, never a silent
    // MFU above 100%.
    const auto recheck_ceiling = [&](bench::PointResult r, int t, ops::Precision d) {
        if (ceiling_gflops > 0) {
            log::warn("{}: MFU {:.0f}% > 100%: this point ran at {:.1f} {}, above "
                      "--ceiling_gflops={:g}; the ceiling given is too low for this machine",
                      bench::point_label(r.point), 100 * r.mfu, r.gflops, gemm_unit(d), ceiling_gflops);
            return r;
        }
        log::warn("{}: {:.1f} {} exceeds the {} ceiling {:.1f}; measuring the ceiling again",
                  bench::point_label(r.point), r.gflops, gemm_unit(d), gemm_name(d), r.ceiling_gflops);
        const auto base = model::BertConfig::preset("base");
        const bench::Ceiling c = bench::measure_ceiling(t, 4096, base.hidden_size,
                                                        base.intermediate_size, ceiling_reps, d);
        ceilings.push_back(ceiling_json(c, 4096, "base"));
        double& best = ceiling_cache[{t, d}];
        const double before = best;
        best = std::max(best, c.gemm_gflops);
        int corrected = 0;
        for (nlohmann::json& q : points)  // earlier points of this (threads, dtype)
            if (q["threads"] == t && q["dtype"] == ops::precision_name(d)) {
                q["ceiling_gflops"] = best;
                q["mfu"] = q["gflops"].get<double>() / best;
                ++corrected;
            }
        if (corrected > 0 && best != before && fmt_out == bench::Format::table)
            log::warn("the MFU of the {} row(s) above at {} thread(s) {} is against the ceiling {:.1f}; against "
                      "the re-measured {:.1f} (as in --json and the rows below) it is {:.2f} of it",
                      corrected, t, ops::precision_name(d), before, best, before / best);
        r.ceiling_gflops = best;
        r.mfu = r.gflops / best;
        if (r.mfu > 1)
            log::warn("{}: MFU {:.0f}% > 100% even against the re-measured ceiling "
                      "{:.1f} {}: the host was slower while the ceiling ran than during the "
                      "point (other work, a throttled vCPU); the figure is not trustworthy",
                      bench::point_label(r.point), 100 * r.mfu, best, gemm_unit(d));
        return r;
    };
    // Every point of the sweep, checked before anything is measured: a point that cannot run as
    // given is skipped with a warning, and a sweep of which none can run is an error.
    const std::vector<int> seqs = int_list(seq_lens, "seq_len"),
                           batches = int_list(batch_sizes, "batch_size"),
                           spus = int_list(spu_list, "steps_per_update");
    std::vector<bench::Point> planned;
    std::vector<std::pair<bench::Point, std::string>> invalid;
    int failed = 0;
    std::string first_skip;
    const auto skip = [&](const bench::Point& p, const std::string& why) {
        ++failed;
        log::warn("skipping point {}: {}", bench::point_label(p), why);
        if (first_skip.empty()) first_skip = why;
    };
    // --data's first batch, read once per (model, sequence length, batch): "" when it reads, else why not
    std::map<std::tuple<std::string, int, int>, std::string> data_checked;
    for (const std::string& m : modes) {
        if (m == "gemm") continue;
        for (ops::Precision d : dtypes)
            for (const auto& [name, config] : models)
                for (int seq : seqs)
                    for (int b : batches)
                        for (int t : threads)
                            for (int spu : m == "train" ? spus : std::vector<int>{1}) {
                                bench::Point p{m,     name,       config,          seq,
                                               b,     t,          spu,             warmup,
                                               steps, data_files, max_predictions, skip_corrupt_records,
                                               min_time, d, task, squad_layout};
                                p.backend = gpu.get();
                                p.last_layer_subset = last_layer_subset;
                                try {
                                    bench::check_point(p);
                                    const auto [at, fresh] = data_checked.try_emplace({name, seq, b});
                                    if (fresh) {
                                        try {
                                            bench::check_data(p, std::max(1, p.batch_size / comm.size()));
                                        } catch (const Error& e) {
                                            at->second = e.what();
                                        }
                                    }
                                    if (!at->second.empty()) throw Error(at->second);
                                    planned.push_back(std::move(p));
                                } catch (const Error& e) {
                                    invalid.emplace_back(p, e.what());
                                }
                            }
    }
    if (planned.empty() && !invalid.empty() &&
        std::find(modes.begin(), modes.end(), "gemm") == modes.end())
        fail("{}{}", invalid.front().second,
             invalid.size() > 1
                 ? fmt::format(" (none of the sweep's {} points can run)", invalid.size())
                 : std::string());
    for (const auto& [p, why] : invalid) skip(p, why);

    std::vector<bench::ProfileResult> profiles;
    // --json: rewritten after every point of the sweep (benchmark_result.complete false), so that
    // a sweep stopped on the way (a time limit, a point that hangs) leaves the points it measured
    const auto write_json = [&](bool complete) {
        if (json_path.empty()) return;
        std::vector<nlohmann::json> all = points, ceils = ceilings;
        for (const auto& g : gemm_points) all.push_back(g), ceils.push_back(g);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        nlohmann::json doc = bench::perfzero_summary(all, ceils, profiles_json, flags.to_json(), wall);
        doc["benchmark_result"]["complete"] = complete;
        write_file_atomic(json_path, doc.dump(2) + "\n");
    };
    bool header = false;
    for (const std::string& m : modes) {
        if (m == "gemm") {
            // stdout keeps one document of --format: the ceilings' text lines go to stderr then
            std::ostream& text = fmt_out == bench::Format::table ? std::cout : std::cerr;
            for (const auto& j : gpu ? bench::run_device_gemm(*gpu, models.front().second, gemm_tokens, gemm_reps,
                                                              dtypes, text)
                                     : run_gemm(threads, models.front().first, models.front().second, gemm_tokens,
                                                gemm_reps, dtypes, text,
                                                [&](const std::string& why) {
                                                    ++failed;
                                                    log::warn("skipping the GEMM ceiling: {}", why);
                                                    if (first_skip.empty()) first_skip = why;
                                                }))
                gemm_points.push_back(j);
            continue;
        }
        for (const bench::Point& p : planned) {
            if (p.mode != m) continue;
            const int t = p.threads;
            const ops::Precision d = p.dtype;
            try {
                const double ceil = ceiling_for(t, d);  // t <= the CPUs: check_point
                nlohmann::json mpi;
                bench::PointResult r;
                if (comm.is_mpi()) {
                    bench::MpiPointResult mr = bench::run_point_mpi(p, ceil, mpi_opts);
                    r = std::move(mr.result);
                    mpi = std::move(mr.mpi);
                } else {
                    r = bench::run_point(p, ceil);
                    if (!gpu && ceil > 0 && r.gflops > ceil) r = recheck_ceiling(r, t, d);
                }
                nlohmann::json j = r.to_json();
                if (!mpi.is_null()) j["mpi"] = mpi;
                // Repeatability: a quiet machine keeps min..max within 5% of the
                // median; say so when it did not, so nobody quotes a noisy figure.
                const double spread =
                    (r.step_ms_max - r.step_ms_min) / r.step_ms_median;
                j["step_ms_spread"] = spread;
                if (spread > 0.05 && r.step_ms.size() > 1)
                    log::warn("{}: step times spread "
                              "{:.0f}% of the median (min {:.1f}, max {:.1f} ms), "
                              "more than 5%: the machine may be busy; rerun or "
                              "raise --steps",
                              bench::point_label(p), 100 * spread, r.step_ms_min,
                              r.step_ms_max);
                points.push_back(j);
                if (fmt_out == bench::Format::table) {
                    const std::string tab =
                        bench::format_points({j}, bench::Format::table);
                    const size_t nl = tab.find('\n');
                    if (!header) std::cout << tab.substr(0, nl + 1);
                    header = true;
                    std::cout << tab.substr(nl + 1) << std::flush;
                }
                if (profile) {
                    profiles.push_back(bench::profile_point(p, profile_steps));
                    profiles_json.push_back(bench::profile_json(profiles.back()));
                    profile_of_point[points.size() - 1] = profiles_json.back();
                }
                write_json(false);
            } catch (const Error& e) {
                if (comm.size() > 1) throw;  // the other ranks wait for this one
                skip(p, e.what());
            } catch (const std::bad_alloc&) {
                skip(p, "out of memory");
            }
        }
    }
    if (fmt_out == bench::Format::json && (!points.empty() || !gemm_points.empty())) {
        std::vector<nlohmann::json> shown = points;  // the sweep's points, then the ceilings'
        for (const auto& [i, prof] : profile_of_point) shown[i]["profile"] = prof;
        shown.insert(shown.end(), gemm_points.begin(), gemm_points.end());
        std::cout << bench::format_points(shown, fmt_out);
    } else if (fmt_out != bench::Format::table && !points.empty()) {
        std::cout << bench::format_points(points, fmt_out);
    }
    if (fmt_out == bench::Format::md && !points.empty())
        std::cout << "\n" << bench::reproduction_table_md(points);
    if (fmt_out != bench::Format::json)  // json: inside its point, above
        for (const auto& pr : profiles)
            std::cout << (fmt_out == bench::Format::table ? "\n" : "")
                      << bench::format_profile(pr, fmt_out);
    if (!points.empty() && measure_ceiling && fmt_out == bench::Format::table)
        for (const auto& c : ceilings)
        {
            const ops::Precision d = ops::parse_precision(c["dtype"].get<std::string>(), "dtype");
            std::cout << fmt::format("MFU ceiling at {} thread(s): {} {:.1f} {} (fp32 FMA peak {:.1f} GFLOP/s)\n",
                                     c["threads"].get<int>(), gemm_name(d), c["gemm_gflops"].get<double>(),
                                     gemm_unit(d), c["fma_peak_gflops"].get<double>());
        }
    // Nothing ran: the error, and the files a user asked for left as they were (an earlier run's
    // report is not replaced by an empty one).
    if (points.empty() && gemm_points.empty() && failed > 0)
        fail("none of the {} points ran; the first: {}", failed, first_skip);
    if (!profiles.empty() && !profile_svg_path.empty()) {
        write_file_atomic(profile_svg_path, bench::profile_svg(profiles));
        log::info("wrote {}", profile_svg_path);
    }
    if (!plot_path.empty()) {
        write_file_atomic(
            plot_path, bench::throughput_svg(points, "bertbench bench: " + sysinfo::cpu_model()));
        log::info("wrote {}", plot_path);
    }
    if (!md_path.empty()) write_file_atomic(md_path, bench::reproduction_table_md(points));
    write_json(true);
    return 0;
}

}  // namespace bertbench::cli
