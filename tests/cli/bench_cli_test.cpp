// `bertbench bench` end to end: a tiny sweep writes the documented JSON fields; impossible points
// are reported and skipped; bad flags give one line and a non-zero exit; csv/json stdout parse;
// --data on the golden TFRecord reports fewer real than padded tokens; --profile writes its SVG.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

using testing::read_json;
using testing::run_bertbench;

// Log lines (stderr, merged by run_bertbench) look like "[    0.00s] warning: ...".
bool is_log_line(const std::string& l) {
    return l.starts_with("[ ") && l.find("s] ") != std::string::npos;
}

TEST(BenchCli, TinySweepWritesJson) {
    const std::string json = ::testing::TempDir() + "/bench_tiny.json";
    const auto r = run_bertbench(
        "bench --mode=train,infer --model=tiny --seq_len=32 "
        "--batch_size=2,3 --threads=1 --warmup=1 --steps=2 --ceiling_gflops=50 --json=" +
        json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["points"].size(), 4u);
    for (const auto& p : j["points"]) {
        for (const char* key : {"mode", "model", "seq_len", "batch_size", "threads",
                                "sequences_per_second", "tokens_per_second", "step_ms_median",
                                "step_ms_min", "step_ms_max", "gflops", "peak_rss_mb"})
            EXPECT_TRUE(p.contains(key)) << key;
        EXPECT_GT(p["sequences_per_second"].get<double>(), 0);
        EXPECT_LE(p["step_ms_min"].get<double>(), p["step_ms_median"].get<double>());
        EXPECT_LE(p["step_ms_median"].get<double>(), p["step_ms_max"].get<double>());
        EXPECT_EQ(p["step_ms"].size(), 2u);
        EXPECT_NEAR(p["tokens_per_second"].get<double>(),
                    p["sequences_per_second"].get<double>() * 32, 1e-6);
        // the process's peak holds every point's (each point restarts the kernel's counter)
        EXPECT_GE(j["process_info"]["max_rss_mb"].get<double>(), p["peak_rss_mb"].get<double>());
    }
    EXPECT_EQ(j["points"][0]["mode"], "train");
    EXPECT_EQ(j["points"][2]["mode"], "infer");
    EXPECT_TRUE(j["system_info"].contains("cpu_model"));
    EXPECT_TRUE(j["build_info"].contains("git_commit"));
    // whether a bf16 figure was emulated, an int8 one without dot-product units: in the report
    EXPECT_TRUE(j["build_info"]["cpu_bf16_emulated"].is_boolean()) << j["build_info"];
    EXPECT_TRUE(j["build_info"]["cpu_int8_dot_product_units"].is_boolean()) << j["build_info"];
    EXPECT_TRUE(j["build_info"]["cpu_native_precisions"].is_string()) << j["build_info"];
    // PerfZero-style sections
    EXPECT_EQ(j["benchmark_result"]["metrics"].size(), 4u * 7u);
    EXPECT_GT(j["benchmark_result"]["wall_time"].get<double>(), 0);
    EXPECT_TRUE(j["process_info"].contains("cpu_percent"));
    EXPECT_TRUE(j["build_info"]["gemm_library"].get<std::string>().starts_with("oneDNN "));
    EXPECT_TRUE(j["definitions"].contains("excluded"));
}

// --json is rewritten after every point: a sweep killed on the way (a time limit, a point that
// never ends) leaves the points it measured, marked incomplete; a finished sweep says complete.
TEST(BenchCli, ASweepKilledOnTheWayLeavesItsMeasuredPoints) {
    const std::string json = ::testing::TempDir() + "/bench_killed.json";
    std::filesystem::remove(json);
    // the tiny point takes a second; BERT-base's step at seq 512 batch 8 on one thread, tens of
    // seconds: the process is killed once the file holds the first point
    const auto r = testing::run_shell(
        "bash -c '" + testing::bertbench_path() +
        " bench --mode=train --model=tiny,base --seq_len=512 --batch_size=8 --threads=1 --warmup=0 --steps=1 "
        "--ceiling_gflops=50 --json=" + json + " & pid=$!; for i in $(seq 1200); do [ -s " + json +
        " ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done; kill -KILL $pid; wait $pid; echo exit $?'");
    EXPECT_NE(r.out.find("exit 137"), std::string::npos) << "killed, not ended: " << r.out;
    const auto j = read_json(json);
    ASSERT_EQ(j["points"].size(), 1u) << j.dump(1);
    EXPECT_EQ(j["points"][0]["model"], "tiny");
    EXPECT_EQ(j["benchmark_result"]["complete"], false);
    const auto done = run_bertbench("bench --mode=infer --model=tiny --seq_len=16 --batch_size=1 --threads=1 "
                                    "--warmup=0 --steps=1 --ceiling_gflops=50 --json=" + json);
    ASSERT_EQ(done.exit_code, 0) << done.out;
    EXPECT_EQ(read_json(json)["benchmark_result"]["complete"], true);
}

// stdout of --format=csv: a header and one row per point, all with the same column count.
TEST(BenchCli, CsvAndJsonFormatsParse) {
    auto r = run_bertbench(
        "bench --mode=infer --model=tiny --seq_len=16 --batch_size=1,2 "
        "--threads=1 --warmup=0 --steps=2 --ceiling_gflops=50 --format=csv 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::vector<std::string> lines;
    std::stringstream in(r.out);
    for (std::string l; std::getline(in, l);)
        if (!is_log_line(l)) lines.push_back(l);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    EXPECT_EQ(lines[0].rfind("mode,model,seq_len,batch_size,threads", 0), 0u) << lines[0];
    const auto commas = [](const std::string& s) { return std::count(s.begin(), s.end(), ','); };
    EXPECT_EQ(commas(lines[1]), commas(lines[0]));
    EXPECT_EQ(lines[2].rfind("infer,tiny,16,2,1,1,", 0), 0u) << lines[2];

    r = run_bertbench(
        "bench --mode=train --model=tiny --seq_len=16 --batch_size=1 --threads=1 "
        "--warmup=0 --steps=1 --ceiling_gflops=50 --format=json 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string json_text;
    std::stringstream in2(r.out);
    for (std::string l; std::getline(in2, l);)
        if (!is_log_line(l)) json_text += l + "\n";
    const auto j = nlohmann::json::parse(json_text);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["optimizer_included"], true);
    EXPECT_NEAR(j[0]["mfu"].get<double>(), j[0]["gflops"].get<double>() / 50, 1e-9);
    // without a ceiling no MFU was measured: null in JSON, empty in CSV (it was 0, an MFU of 0 %)
    r = run_bertbench("bench --mode=infer --model=tiny --seq_len=16 --batch_size=1 --threads=1 --warmup=0 --steps=1 "
                      "--noceiling --format=json 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string none_text;  // less the log lines (a sanitizer build's warning among them)
    std::stringstream in3(r.out);
    for (std::string l; std::getline(in3, l);)
        if (!is_log_line(l)) none_text += l + "\n";
    const auto none = nlohmann::json::parse(none_text);
    EXPECT_TRUE(none[0]["mfu"].is_null()) << r.out;
    EXPECT_TRUE(none[0]["ceiling_gflops"].is_null()) << r.out;
    r = run_bertbench("bench --mode=infer --model=tiny --seq_len=16 --batch_size=1 --threads=1 --warmup=0 --steps=1 "
                      "--noceiling --format=csv 2>/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::vector<std::string> header, row;
    std::stringstream csv(r.out);
    for (std::string l; std::getline(csv, l);)
        if (!is_log_line(l)) (header.empty() ? header : row).push_back(l);
    ASSERT_EQ(row.size(), 1u) << r.out;
    const auto field = [](const std::string& line, const std::string& key, const std::string& head) {
        std::vector<std::string> keys, values;
        for (std::stringstream k(head), v(line); ;) {
            std::string a, b;
            if (!std::getline(k, a, ',')) break;
            std::getline(v, b, ',');
            keys.push_back(a), values.push_back(b);
        }
        const auto at = std::find(keys.begin(), keys.end(), key);
        return at == keys.end() ? std::string("<no column>") : values[static_cast<size_t>(at - keys.begin())];
    };
    EXPECT_EQ(field(row[0], "mfu", header[0]), "") << r.out;
    EXPECT_NE(field(row[0], "gflops", header[0]), "") << r.out;
}

// --mode=gemm keeps stdout one document of --format: JSON carries the ceilings (their text lines
// go to stderr); the CSV/Markdown point table has no columns for them, so those are refused.
TEST(BenchCli, GemmModeFollowsTheFormat) {
    const std::string gemm = " bench --mode=gemm,infer --model=tiny --seq_len=16 --batch_size=1 --threads=1 "
                             "--warmup=0 --steps=1 --gemm_tokens=64 --gemm_reps=1";
    const auto r = testing::run_shell("(" + testing::bertbench_path() + gemm + " --format=json 2>/dev/null)");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);  // the whole of stdout
    ASSERT_EQ(j.size(), 2u) << r.out;
    EXPECT_EQ(j[0]["mode"], "infer");
    EXPECT_EQ(j[1]["mode"], "gemm");
    EXPECT_GT(j[1]["gemm_gflops"].template get<double>(), 0);
    const auto csv = run_bertbench(gemm + " --format=csv");
    EXPECT_EQ(csv.exit_code, 1) << csv.out;
    EXPECT_NE(csv.out.find("--mode=gemm with --format=csv: the point table has no columns"), std::string::npos)
        << csv.out;
}

TEST(BenchCli, DataModeReportsRealAndPaddedTokens) {
    const std::string json = ::testing::TempDir() + "/bench_data.json";
    const std::string svg = ::testing::TempDir() + "/bench_profile.svg";
    const std::string data = std::string(std::getenv("BB_SHARED_DIR")) +
                             "/golden/pretraining/public_128_s12345_d2.tfrecord";
    const auto r = run_bertbench(
        "bench --mode=train --model=tiny --seq_len=128 --batch_size=4 "
        "--threads=1 --warmup=1 --steps=2 --ceiling_gflops=50 --data=" +
        data + " --profile --profile_steps=1 --profile_svg=" + svg + " --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("profile: train tiny seq 128 batch 4"), std::string::npos) << r.out;
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["points"].size(), 1u);
    const auto& p = j["points"][0];
    EXPECT_EQ(p["data"], "tfrecord");
    EXPECT_LT(p["tokens_per_second"].get<double>(), p["padded_tokens_per_second"].get<double>());
    ASSERT_EQ(j["profiles"].size(), 1u);
    double share = 0;
    for (const auto& op : j["profiles"][0]["ops"]) share += op["share"].get<double>();
    EXPECT_NEAR(share, 1.0, 1e-6);
    std::ifstream s(svg);
    std::string text((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("</svg>"), std::string::npos);

    // --format=json: stdout is one JSON document, each point carrying its profile; CSV has no
    // place for the profile's table and is refused with it.
    const std::string out = ::testing::TempDir() + "/bench_profile_stdout.json";
    // (a subshell: run_shell adds 2>&1, which must not reach the file)
    const auto js = testing::run_shell("(" + testing::bertbench_path() +
                                       " bench --mode=train --model=tiny --seq_len=128 --batch_size=4 --threads=1 "
                                       "--warmup=1 --steps=2 --noceiling --profile --profile_steps=1 --profile_svg= "
                                       "--format=json >" + out + " 2>/dev/null)");
    ASSERT_EQ(js.exit_code, 0) << js.out;
    std::ifstream o(out);
    const auto doc = nlohmann::json::parse(o);  // throws on a second document
    ASSERT_EQ(doc.size(), 1u);
    ASSERT_TRUE(doc[0].contains("profile"));
    EXPECT_FALSE(doc[0]["profile"]["ops"].empty());
    const auto csv = run_bertbench("bench --mode=train --model=tiny --profile --format=csv");
    EXPECT_EQ(csv.exit_code, 1);
    EXPECT_NE(csv.out.find("error: --profile with --format=csv: expected one CSV document"), std::string::npos)
        << csv.out;
}

// A --dtype and --steps_per_update sweep with --profile: each breakdown names its point (dtype and
// spu) in the text titles, the SVG and the --json profiles, so they can be told apart.
TEST(BenchCli, ProfilesOfASweepNameTheirDtypeAndSpu) {
    const std::string json = ::testing::TempDir() + "/bench_profile_sweep.json";
    const std::string svg = ::testing::TempDir() + "/bench_profile_sweep.svg";
    const auto r = run_bertbench("bench --mode=train --model=tiny --seq_len=32 --batch_size=2 --threads=1 --warmup=1 "
                                 "--steps=1 --noceiling --dtype=fp32,bf16 --steps_per_update=1,2 --profile "
                                 "--profile_steps=1 --profile_svg=" + svg + " --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string text = read_file(svg);
    const std::vector<std::pair<std::string, int>> points = {{"fp32", 1}, {"fp32", 2}, {"bf16", 1}, {"bf16", 2}};
    const auto j = read_json(json);
    ASSERT_EQ(j["profiles"].size(), points.size());
    for (size_t i = 0; i < points.size(); ++i) {
        const auto& [dtype, spu] = points[i];
        const std::string label = fmt::format("train tiny seq 32 batch 2 threads 1 spu {} {}", spu, dtype);
        EXPECT_EQ(testing::count_of(r.out, "profile: " + label + ": "), 1u) << label << "\n" << r.out;
        EXPECT_EQ(testing::count_of(text, ">" + label + ": "), 1u) << label;
        EXPECT_EQ(j["profiles"][i]["dtype"], dtype);
        EXPECT_EQ(j["profiles"][i]["steps_per_update"], spu);
        EXPECT_EQ(j["profiles"][i]["data_files"], nlohmann::json::array());
        EXPECT_EQ(j["profiles"][i]["last_layer_subset"], false);
    }
}

// A --data record of other lengths than the point's: the hint names bench's flags (--seq_len,
// --max_predictions), not pretrain's, which bench does not take.
TEST(BenchCli, DataOfOtherLengthsNamesBenchsFlags) {
    const std::string data = std::string(std::getenv("BB_SHARED_DIR")) + "/golden/pretraining/public_128_s12345_d2.tfrecord";
    for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
             {"--seq_len=64", "feature input_ids: expected 64 values, got 128"},
             {"--seq_len=128 --max_predictions=10", "feature masked_lm_positions: expected 10 values, got 20"}}) {
        const auto r = run_bertbench("bench --mode=infer --model=tiny --batch_size=2 --threads=1 --warmup=1 --steps=1 "
                                     "--noceiling --data=" + data + " " + flags);
        EXPECT_NE(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find(says + " (hint: check --seq_len / --max_predictions against the data)"), std::string::npos)
            << r.out;
        EXPECT_EQ(r.out.find("--max_seq_length"), std::string::npos) << r.out;
    }
    // files too small for the batch: said from the data, before the batch's memory is planned (it
    // was "out of memory" here, after seconds of allocation at smaller batches)
    const auto r = run_bertbench("bench --mode=infer --model=tiny --batch_size=1000000 --threads=1 --warmup=1 "
                                 "--steps=1 --noceiling --data=" + data);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--data: the files hold fewer than --batch_size=1000000 records"), std::string::npos) << r.out;
}

// --data is read before anything is measured: a file that is no HDF5 shard fails at once, not
// after the seconds of the GEMM ceiling's measurement; in a sweep, a point the data cannot serve
// (another sequence length) is skipped with its reason before the ceiling, and the others run.
TEST(BenchCli, DataIsCheckedBeforeTheCeiling) {
    const std::string junk = ::testing::TempDir() + "/bench_junk_shard.hdf5";
    std::ofstream(junk) << "not an HDF5 file\n";
    auto r = run_bertbench("bench --mode=infer --model=tiny --batch_size=2 --threads=1 --steps=1 --data=" + junk);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find(junk + ": expected an HDF5 file, got no HDF5 signature"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("measuring the"), std::string::npos) << r.out;
    const std::string data = std::string(std::getenv("BB_SHARED_DIR")) + "/golden/pretraining/public_128_s12345_d2.tfrecord";
    r = run_bertbench("bench --mode=infer --model=tiny --seq_len=64,128 --batch_size=2 --threads=1 --warmup=0 --steps=1 "
                      "--ceiling_reps=1 --data=" + data);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const size_t skipped = r.out.find("feature input_ids: expected 64 values, got 128"), measured = r.out.find("measuring the");
    ASSERT_NE(skipped, std::string::npos) << r.out;
    ASSERT_NE(measured, std::string::npos) << r.out;
    EXPECT_LT(skipped, measured) << r.out;
}

// A flag that no point of the sweep uses is refused in one line naming it, before anything runs
// (each was accepted and changed nothing).
TEST(BenchCli, FlagsNoPointUsesAreRefused) {
    for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
             {"--mode=gemm --seq_len=64", "--seq_len: not used by --mode=gemm"},
             {"--mode=gemm --profile", "--profile: not used by --mode=gemm"},
             {"--mode=gemm --batch_size=4", "--batch_size: not used by --mode=gemm"},
             {"--mode=infer --steps_per_update=2", "--steps_per_update: applies to --mode=train points, and this sweep has none"},
             {"--squad_layout=real", "--squad_layout: applies to --task=squad"},
             {"--task=squad --squad_layout=padded", "--squad_layout: applies to --data"},
             {"--task=squad --max_predictions=5", "--max_predictions: applies to --task=pretraining"}}) {
        const auto r = run_bertbench("bench --model=tiny --threads=1 " + flags);
        EXPECT_EQ(r.exit_code, 1) << flags << ": " << r.out;
        EXPECT_NE(r.out.find("bertbench bench: error: " + says), std::string::npos) << flags << ": " << r.out;
        EXPECT_EQ(r.out.find("measuring"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;  // no "no effect" warning before the error
    }
    // used by one mode of the sweep: accepted
    const auto r = run_bertbench("bench --mode=train,infer --model=tiny --seq_len=16 --batch_size=2 --threads=1 "
                                 "--warmup=0 --steps=1 --noceiling --steps_per_update=2");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

// --help lists every --dtype bench accepts (int8 included: the README's sweep).
TEST(BenchCli, HelpListsEveryDtype) {
    const auto r = run_bertbench("bench --help");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("fp32 | bf16 | int8"), std::string::npos) << r.out;
}

TEST(BenchCli, ImpossiblePointIsSkipped) {
    // seq 1024 exceeds tiny's 512 positions: reported and skipped; seq 16 still runs.
    const auto r = run_bertbench(
        "bench --mode=infer --model=tiny --seq_len=1024,16 --batch_size=1 "
        "--threads=1,100000 --warmup=0 --steps=1 --ceiling_gflops=50");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("max_position_embeddings"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("infer  tiny"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--threads=100000: only"), std::string::npos) << r.out;
    // a GEMM ceiling likewise; none left: an error, as for points (it exited 0 with an empty report)
    const std::string json = ::testing::TempDir() + "/bench_gemm_skipped.json";
    const auto g = run_bertbench("bench --mode=gemm --threads=100000 --gemm_tokens=64 --gemm_reps=1 --json=" + json);
    EXPECT_EQ(g.exit_code, 1) << g.out;
    EXPECT_NE(g.out.find("error: none of the 1 points ran; the first: --threads=100000: only"), std::string::npos)
        << g.out;
    EXPECT_FALSE(std::filesystem::exists(json));
}

TEST(BenchCli, SweepThatCannotRunFailsBeforeMeasuring) {
    // No point can run: one error line and exit 1, before the ceiling or any point is measured
    // (no "measuring" progress line, no table).
    auto r = run_bertbench("bench --mode=infer --model=tiny,mini --seq_len=600 --batch_size=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: --seq_len=600: longer than max_position_embeddings (512) of model "
                         "tiny (none of the sweep's 2 points can run)"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("measuring"), std::string::npos) << r.out;
    // A bad mode anywhere in the list is refused before the good ones run.
    r = run_bertbench("bench --mode=infer,foo --model=tiny --seq_len=16 --batch_size=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--mode: expected train, infer or gemm, got \"foo\""), std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("infer  tiny"), std::string::npos) << r.out;
}

TEST(BenchCli, BadFlagsAreOneLineErrors) {
    auto r = run_bertbench("bench --batch_sise=8");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("unknown flag --batch_sise (did you mean --batch_size?)"),
              std::string::npos)
        << r.out;
    r = run_bertbench("bench --model=huge");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("huge"), std::string::npos) << r.out;
    r = run_bertbench("bench --batch_size=0");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--batch_size"), std::string::npos) << r.out;
    r = run_bertbench("bench --batch_size=10000000");  // the limit stated, not "positive"
    EXPECT_NE(r.out.find("--batch_size: expected integers 1 .. 1000000 separated by commas, got \"10000000\""),
              std::string::npos) << r.out;
    // an empty item of any list is not dropped silently
    for (const char* list : {"--seq_len=128,,512", "--model=tiny,", "--dtype=,fp32", "--mode=infer,,gemm"}) {
        r = run_bertbench(std::string("bench ") + list);
        EXPECT_EQ(r.exit_code, 1) << list;
        const std::string flag = std::string(list).substr(0, std::string(list).find('='));
        EXPECT_NE(r.out.find(flag + ": expected values separated by commas, got an empty item"), std::string::npos)
            << r.out;
    }
    r = run_bertbench("nosuchcommand");
    EXPECT_EQ(r.exit_code, 2);
    // Each found before any measurement (a reps of 0 was a SIGSEGV, an unwritable --json found
    // only after the sweep).
    const std::pair<const char*, const char*> cases[] = {
        {"bench --mode=gemm --gemm_reps=0", "--gemm_reps: expected >= 1, got 0"},
        {"bench --mode=infer --model=tiny --ceiling --ceiling_reps=-1", "--ceiling_reps: expected >= 1, got -1"},
        {"bench --mode=gemm --gemm_tokens=-5", "--gemm_tokens: expected 1..1048576 rows, got -5"},
        {"bench --mode=infer --model=tiny --json=/nonexistent-dir/b.json", "its directory /nonexistent-dir does not exist"},
        {"bench --mode=infer --model=tiny --json=/proc/b.json", "--json=/proc/b.json: cannot create a file in /proc: "},
        {"bench --mode=gemm --gemm_tokens=64 --md=g.md", "--md=g.md: --mode=gemm measures ceilings, no points"},
        {"bench --mode=gemm --gemm_tokens=64 --plot=g.svg", "--plot=g.svg: --mode=gemm measures ceilings, no points"},
        {"bench --mode=infer --model=tiny --json=b.svg --plot=./b.svg", "the same file"},
        {"bench --mode=infer --model=tiny --bert_config_file=x.json", "--bert_config_file and --model"},
        {"bench --mode=infer --model=tiny --seq_len=32 --max_predictions=33", "expected at most --seq_len=32"},
        {"bench --mode=foo --model=tiny --seq_len=32", "--mode: expected train, infer or gemm, got \"foo\""},
        // flags that no point of the sweep uses, and sweeps that would repeat a point
        {"bench --mode=infer --model=tiny --profile_svg=p.svg", "--profile_svg: applies to --profile"},
        {"bench --mode=infer --model=tiny --profile_steps=2", "--profile_steps: applies to --profile"},
        {"bench --mode=infer --model=tiny --gemm_reps=2", "--gemm_reps: applies to --mode=gemm"},
        {"bench --mode=infer --model=tiny --noceiling --ceiling_reps=5", "--ceiling_reps: applies where bench measures"},
        {"bench --mode=infer --model=tiny --ceiling_gflops=9 --ceiling_reps=5", "--ceiling_reps: applies where"},
        {"bench --mode=infer --model=tiny --noceiling --ceiling_gflops=100", "--noceiling and --ceiling_gflops: expected one"},
        {"bench --mode=infer --model=tiny --bucket_mb=0", "--bucket_mb: applies under mpirun"},
        {"bench --mode=infer --model=tiny --dtype=fp32,int8 --ceiling_gflops=100",
         "--ceiling_gflops=100: one ceiling for a sweep over --dtype=fp32,int8"},
        {"bench --mode=infer --model=tiny --ceiling_gflops=1e-300", "--ceiling_gflops: expected 0.001 .. 1e7 GFLOP/s"},
        {"bench --mode=gemm,infer --model=tiny,mini", "--mode=gemm times one model's linear shapes, got 2 models"},
        {"bench --mode=infer --model=tiny --batch_size=2,2", "--batch_size: expected each value once, got 2 twice"},
        {"bench --mode=infer --model=tiny --dtype=bf16,bfloat16", "--dtype: expected each value once, got bf16 twice"},
        {"bench --mode=infer --model=tiny,tiny", "--model: expected each value once, got tiny twice"}};
    for (const auto& [cmd, message] : cases) {
        r = run_bertbench(std::string(cmd) + " --steps=1 --warmup=0 --threads=1");
        EXPECT_EQ(r.exit_code, 1) << cmd;
        EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("seq/s"), std::string::npos) << r.out;  // nothing measured
    }
}

// No masked position in the batch (seq 2: [CLS] [SEP]) is an MLM head of no rows (once a SIGFPE
// in oneDNN's primitive creation).
TEST(BenchCli, InferenceOfSequencesWithoutMaskedPositions) {
    for (const char* seq : {"1", "2"}) {
        const auto r = run_bertbench(std::string("bench --mode=infer --model=tiny --seq_len=") + seq +
                                     " --batch_size=1 --steps=1 --warmup=0 --noceiling --threads=1");
        EXPECT_EQ(r.exit_code, 0) << r.out;
    }
}

}  // namespace
}  // namespace bertbench

namespace bertbench {
namespace {

TEST(BenchCli, ReportsStepSpread) {
    const std::string json = ::testing::TempDir() + "/bench_spread.json";
    const auto r = testing::run_bertbench("bench --mode=infer --model=tiny --seq_len=16 --batch_size=1 "
                                          "--threads=1 --warmup=0 --steps=3 --noceiling --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    const auto& p = j["points"][0];
    const double want = (p["step_ms_max"].get<double>() - p["step_ms_min"].get<double>()) /
                        p["step_ms_median"].get<double>();
    EXPECT_NEAR(p["step_ms_spread"].get<double>(), want, 1e-9);
    // The warning appears exactly when the spread exceeds 5%.
    EXPECT_EQ(r.out.find("more than 5%") != std::string::npos, want > 0.05) << r.out;
}

// --min_time keeps timing past --steps until the timed steps add up to it; the rates are per step
// actually timed (sequences/s = batch / median step time whatever the count).
TEST(BenchCli, MinTimeTimesMoreSteps) {
    const std::string json = ::testing::TempDir() + "/bench_min_time.json";
    const auto r = testing::run_bertbench("bench --mode=infer --model=tiny --seq_len=16 --batch_size=2 "
                                          "--threads=1 --warmup=1 --steps=2 --min_time=0.2 "
                                          "--noceiling --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    const auto& p = j["points"][0];
    const auto steps = p["step_ms"].get<std::vector<double>>();
    double total = 0;
    for (double ms : steps) total += ms;
    EXPECT_GE(total, 200.0);
    EXPECT_GT(steps.size(), 2u);
    EXPECT_EQ(p["timed_steps"].get<size_t>(), steps.size());
    EXPECT_NEAR(p["sequences_per_second"].get<double>(), 2e3 / p["step_ms_median"].get<double>(),
                1e-9 * p["sequences_per_second"].get<double>());
    const auto bad = testing::run_bertbench("bench --min_time=-1");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.out.find("--min_time: expected 0..3600 seconds, got -1"), std::string::npos)
        << bad.out;
}

// An MFU above 100% never goes by silently: a given ceiling below the point's rate is named.
TEST(BenchCli, MfuAboveOneIsExplained) {
    const auto r = run_bertbench(
        "bench --mode=infer --model=tiny --seq_len=16 --batch_size=2 --threads=1 --warmup=0 "
        "--steps=1 --ceiling_gflops=0.001 --format=csv");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("> 100%: this point ran at"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--ceiling_gflops=0.001; the ceiling given is too low"), std::string::npos)
        << r.out;
}

}  // namespace
}  // namespace bertbench

// ---- bench --task=squad ----------------------------------------------------------------------

namespace bertbench {
namespace {

// Tiny's span model: encoder + span head matmul FLOPs of B full sequences of T tokens (two per
// multiply-add: per layer 4·N·H² + 2·N·H·I + 2·B·T²·H, the head N·H·2).
double tiny_squad_flops(int B, int T) {
    const double L = 2, H = 128, I = 512, N = static_cast<double>(B) * T;
    return 2 * (L * (4 * N * H * H + 2 * N * H * I + 2.0 * B * T * T * H) + N * H * 2);
}

TEST(BenchCli, SquadSweepWritesJson) {
    const std::string json = ::testing::TempDir() + "/bench_squad.json";
    const auto r = testing::run_bertbench(
        "bench --task=squad --mode=train,infer --model=tiny --seq_len=48 --batch_size=1,2 "
        "--threads=1 --warmup=1 --steps=2 --ceiling_gflops=50 --format=md --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("**SQuAD training** (sequences/s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("**SQuAD inference** (sequences/s"), std::string::npos) << r.out;
    const auto j = read_json(json);
    ASSERT_EQ(j["points"].size(), 4u);
    for (const auto& p : j["points"]) {
        EXPECT_EQ(p["task"], "squad");
        EXPECT_EQ(p["data"], "synthetic");
        EXPECT_GT(p["sequences_per_second"].get<double>(), 0);
        const int b = p["batch_size"];
        const bool train = p["mode"] == "train";
        EXPECT_EQ(p["optimizer_included"], train);
        EXPECT_EQ(p["optimizer"], train ? "adamw" : "none");
        const double flops = p["gflops"].get<double>() * 1e9 * p["step_ms_median"].get<double>() / 1e3;
        const double want = tiny_squad_flops(b, 48) * (train ? 3 : 1);
        EXPECT_NEAR(flops, want, 1e-9 * want) << p.dump();
        EXPECT_NEAR(p["mfu"].get<double>(), p["gflops"].get<double>() / 50, 1e-9);
    }
    // PerfZero metric names say the task; pretraining names stay as they were
    EXPECT_EQ(j["benchmark_result"]["metrics"][0]["name"].get<std::string>().rfind(
                  "squad/train/tiny/seq48/b1/t1/spu1/", 0),
              0u)
        << j["benchmark_result"]["metrics"][0];
    EXPECT_TRUE(j["definitions"].contains("squad_train_step"));
}

// --data with run_squad.py's eval features (the golden set, max_seq_length 384): by default the
// reference's padded layout (real tokens counted as such: fewer than the padded rows), [CLS]
// targets for training (eval features carry no positions); with the train features, their own
// positions; --squad_layout=real computes the real tokens only. The profile names the span head's
// backward.
TEST(BenchCli, SquadDataUsesRealTokensOfFeatures) {
    const std::string dir = std::string(std::getenv("BB_SHARED_DIR")) + "/golden/squad_pipeline/";
    const std::string json = ::testing::TempDir() + "/bench_squad_data.json";
    const std::string svg = ::testing::TempDir() + "/bench_squad_profile.svg";
    auto r = testing::run_bertbench(
        "bench --task=squad --mode=train,infer --model=tiny --seq_len=384 --batch_size=2 "
        "--threads=1 --warmup=1 --steps=2 --ceiling_gflops=50 --data=" + dir +
        "features_384_eval.tf_record --profile --profile_steps=1 --profile_svg=" + svg +
        " --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("profile: squad train tiny seq 384 batch 2"), std::string::npos) << r.out;
    auto j = read_json(json);
    ASSERT_EQ(j["points"].size(), 2u);
    for (const auto& p : j["points"]) {
        EXPECT_EQ(p["data"], "tfrecord");
        EXPECT_EQ(p["span_labels"], "cls");
        EXPECT_EQ(p["squad_layout"], "padded");
        EXPECT_GT(p["tokens_per_second"].get<double>(), 0);
        EXPECT_LT(p["tokens_per_second"].get<double>(), p["padded_tokens_per_second"].get<double>());
    }
    bool span_bwd = false;
    for (const auto& op : j["profiles"][0]["ops"]) span_bwd |= op["op"] == "span head bwd";
    EXPECT_TRUE(span_bwd) << j["profiles"][0].dump();
    r = testing::run_bertbench(
        "bench --task=squad --mode=train --model=tiny --seq_len=384 --batch_size=2 --threads=1 "
        "--warmup=0 --steps=1 --noceiling --squad_layout=real --data=" + dir +
        "features_384_train.tf_record --json=" + json);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    j = read_json(json);
    EXPECT_EQ(j["points"][0]["span_labels"], "features");
    EXPECT_EQ(j["points"][0]["squad_layout"], "real");
    EXPECT_LT(j["points"][0]["real_token_fraction"].get<double>(), 1.0);
    // features of another max_seq_length: the point is skipped with the record named
    r = testing::run_bertbench(
        "bench --task=squad --mode=infer --model=tiny --seq_len=128 --batch_size=2 --threads=1 "
        "--noceiling --data=" + dir + "features_384_eval.tf_record");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("record 0: feature input_ids: expected 128 int64 value(s), got 384"),
              std::string::npos)
        << r.out;
    // No point ran (the first batch is whole, so the point is planned; the second is cut short):
    // the reports asked for are left as they were, not replaced by empty ones.
    std::string features = read_file(dir + "features_384_eval.tf_record");
    size_t cut = 0;
    for (int rec = 0; rec < 2; ++rec) {  // TFRecord framing: u64 length, u32 crc, data, u32 crc
        uint64_t len = 0;
        std::memcpy(&len, features.data() + cut, sizeof len);
        cut += 16 + len;
    }
    const std::string truncated = ::testing::TempDir() + "/bench_squad_truncated.tf_record";
    write_file_atomic(truncated, features.substr(0, cut + 40));
    const std::string md = ::testing::TempDir() + "/bench_squad_data.md";
    write_file_atomic(md, "an earlier table\n");
    const std::string before = read_file(json);
    r = testing::run_bertbench("bench --task=squad --mode=infer --model=tiny --seq_len=384 --batch_size=2 "
                               "--threads=1 --warmup=1 --steps=2 --noceiling --data=" + truncated + " --json=" + json +
                               " --md=" + md);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("none of the 1 points ran"), std::string::npos) << r.out;
    EXPECT_EQ(read_file(json), before);
    EXPECT_EQ(read_file(md), "an earlier table\n");
}

TEST(BenchCli, BadTaskIsOneLineError) {
    const auto r = testing::run_bertbench("bench --task=squat --model=tiny");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--task: expected pretraining or squad, got \"squat\""), std::string::npos)
        << r.out;
    size_t lines = 0;
    for (char ch : r.out) lines += ch == '\n';
    EXPECT_EQ(lines, 1u) << r.out;
    const auto l = testing::run_bertbench("bench --task=squad --squad_layout=dense --model=tiny");
    EXPECT_EQ(l.exit_code, 1);
    EXPECT_NE(l.out.find("--squad_layout: expected padded or real, got \"dense\""),
              std::string::npos)
        << l.out;
}

// --last_layer_subset: pretraining points run with it and say so; the span head refuses it in one line.
TEST(BenchCli, LastLayerSubsetIsRecordedAndRefusedForSquad) {
    for (const bool subset : {false, true}) {
        const std::string json = ::testing::TempDir() + "/bench_subset.json";
        const auto r = run_bertbench("bench --mode=train --model=tiny --seq_len=32 --batch_size=4 --threads=1 "
                                     "--warmup=1 --steps=2 --ceiling_gflops=50 --json=" + json +
                                     (subset ? " --last_layer_subset" : ""));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const auto j = read_json(json);
        EXPECT_EQ(j["points"][0]["last_layer_subset"], subset);
        EXPECT_EQ(j["config"]["last_layer_subset"], subset);
    }
    const auto r = run_bertbench("bench --task=squad --model=tiny --last_layer_subset");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--last_layer_subset: applies to --task=pretraining"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

// The PyTorch peer runs the same SQuAD points and counts the same FLOPs (skipped without torch).
TEST(BenchCli, TorchPeerSquadRunsOnTiny) {
    if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "peer check skipped: torch not importable by /usr/bin/python3";
    const std::string json = ::testing::TempDir() + "/torch_squad.json";
    const std::string cmd = std::string("/usr/bin/python3 ") + std::getenv("BB_SOURCE_DIR") +
                            "/bench/peer/torch_bench.py --task=squad --mode=train,infer "
                            "--model=tiny --seq_len=32 --batch_size=2 --threads=1 --warmup=1 "
                            "--steps=1 --dtype=fp32 --json=" + json + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const auto j = read_json(json);
    ASSERT_EQ(j["points"].size(), 2u);
    for (const auto& p : j["points"]) {
        EXPECT_EQ(p["task"], "squad");
        EXPECT_GT(p["sequences_per_second"].get<double>(), 0);
        const bool train = p["mode"] == "train";
        EXPECT_EQ(p["optimizer"], train ? "adamw" : "none");
        const double flops = p["gflops"].get<double>() * 1e9 * p["step_ms_median"].get<double>() / 1e3;
        const double want = tiny_squad_flops(2, 32) * (train ? 3 : 1);
        EXPECT_NEAR(flops, want, 1e-6 * want) << p.dump();
    }
}

}  // namespace
}  // namespace bertbench
