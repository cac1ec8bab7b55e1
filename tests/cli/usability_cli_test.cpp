// Small things a daily user notices (issue 14 §4), on the real binary: `bertbench --version`,
// `bertbench help CMD`, a run shorter than its warm-up updates states that its throughput was not
// measured instead of "0.0 seq/s", no empty progress line, and config floats written as given;
// issue 25 item 10: a directory where a file is expected, no empty output directory after a failed
// start, squad-eval's warning for predictions of another dataset.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_bertbench;
using testing::slurp;

TEST(UsabilityCli, VersionAndHelpCmd) {
    const auto v = run_bertbench("--version");
    ASSERT_EQ(v.exit_code, 0) << v.out;
    EXPECT_TRUE(json::parse(v.out).contains("build_info")) << v.out;
    EXPECT_EQ(json::parse(v.out)["build_info"], json::parse(run_bertbench("version").out)["build_info"]);

    const auto h = run_bertbench("help pretrain");
    ASSERT_EQ(h.exit_code, 0) << h.out;
    EXPECT_EQ(h.out, run_bertbench("pretrain --help").out);
    EXPECT_NE(h.out.find("usage: bertbench pretrain"), std::string::npos) << h.out;
    EXPECT_NE(run_bertbench("help pick-eval").out.find("--output_tfrecord"), std::string::npos);
    const auto bad = run_bertbench("help nosuchcommand");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.out.find("unknown command \"nosuchcommand\""), std::string::npos) << bad.out;
}

// `bertbench -h` is `bertbench --help`; a mistyped command is named with the closest one and the
// command list (issue 25 item 10).
TEST(UsabilityCli, DashHAndAMistypedCommandGetHelpAndASuggestion) {
    const auto h = run_bertbench("-h");
    EXPECT_EQ(h.exit_code, 0) << h.out;
    EXPECT_EQ(h.out, run_bertbench("--help").out);
    EXPECT_NE(h.out.find("usage: bertbench <command>"), std::string::npos) << h.out;
    const auto typo = run_bertbench("sqaud --do_predict");
    EXPECT_EQ(typo.exit_code, 2) << typo.out;
    EXPECT_EQ(typo.out.rfind("bertbench: unknown command \"sqaud\" (did you mean \"squad\"?)\n", 0),
              0u) << typo.out;
    EXPECT_NE(typo.out.find("  squad-eval "), std::string::npos) << typo.out;  // the command list
    EXPECT_NE(run_bertbench("pretrian").out.find("(did you mean \"pretrain\"?)"), std::string::npos);
    // Nothing close: no guess.
    const auto far = run_bertbench("frobnicate");
    EXPECT_EQ(far.exit_code, 2);
    EXPECT_NE(far.out.find("unknown command \"frobnicate\"\n"), std::string::npos) << far.out;
}

// Another script's spelling gets "did you mean --X?" with an X the command itself takes (eval once
// offered pretrain's --eval_input_file and --train_batch_size, which it then refused).
TEST(UsabilityCli, EveryDidYouMeanNamesAFlagOfThatCommand) {
    for (const std::string cmd : {"pretrain", "eval", "squad"}) {
        const std::string help = run_bertbench(cmd + " --help").out;
        for (const char* name : {"eval_data", "eval_input_file", "batch_size", "batch-size", "lr",
                                 "checkpoint", "max_seq_len", "train_data", "num-intra-threads",
                                 "per_device_eval_batch_size", "eval_batch_size", "output_dir"}) {
            const auto r = run_bertbench(cmd + " --" + name + "=1");
            if (r.out.find("unknown flag") == std::string::npos) continue;  // one it takes
            EXPECT_NE(r.exit_code, 0) << r.out;
            const size_t at = r.out.find("did you mean ");
            if (at == std::string::npos) continue;
            const std::string guess = r.out.substr(at, r.out.find('?', at) - at);
            for (size_t f = guess.find("--"); f != std::string::npos; f = guess.find("--", f + 2)) {
                const size_t end = guess.find_first_not_of("abcdefghijklmnopqrstuvwxyz_-0123456789", f + 2);
                const std::string flag = guess.substr(f, end == std::string::npos ? end : end - f);
                const size_t listed = help.find("\n  " + flag);
                const char next = listed == std::string::npos ? 'x' : help[listed + 3 + flag.size()];
                EXPECT_TRUE(next == '=' || next == ' ' || next == '\n')
                    << cmd << " --" << name << ": " << r.out << "(" << flag << " is not in its --help)";
            }
        }
    }
}

// A bad engine choice in the environment is a one-line error before the command writes anything.
TEST(UsabilityCli, BadEngineEnvironmentStopsBeforeAnyOutput) {
    const fs::path out = fs::temp_directory_path() / ("bb_usability_env_" + std::to_string(getpid()));
    fs::remove_all(out);
    for (const std::string env : {"BB_ISA=avx3", "BB_ATTENTION=sometimes"}) {
        const auto r = testing::run_shell(env + " '" + testing::bertbench_path() +
                                          "' pretrain --model=tiny --input_file=/nonexistent "
                                          "--output_dir=" + out.string());
        EXPECT_EQ(r.exit_code, 1) << env << ": " << r.out;
        const std::string var = env.substr(0, env.find('='));
        EXPECT_NE(r.out.find("error: " + var), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(env.substr(env.find('=') + 1)), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(out)) << env;
    }
}

// --device (cli/device_flag.hpp): cuda on a build without the CUDA backend, or on a machine without
// a GPU, is one line before any output, naming what is missing; an unknown device names the
// choices. (A CUDA build with a GPU refuses the engine's commands in one line too: docs/gpu.md.)
TEST(UsabilityCli, DeviceCudaWithoutItStopsBeforeAnyOutput) {
    const fs::path out = fs::temp_directory_path() / ("bb_usability_dev_" + std::to_string(getpid()));
    fs::remove_all(out);
    const std::string version = run_bertbench("version").out;
    const bool built = json::parse(version)["system_info"]["backends"]["cuda"]["built"].get<bool>();
    const std::vector<std::string> commands = {
        "pretrain --model=tiny --input_file=/nonexistent --output_dir=" + out.string(),
        "squad --do_predict --output_dir=" + out.string(),
        "eval --input_file=/nonexistent --init_checkpoint=/nonexistent", "bench --mode=gemm",
        "bench --mode=infer --model=tiny", "bench --mode=train --model=tiny"};
    for (const std::string& cmd : commands) {
        const auto r = run_bertbench(cmd + " --device=cuda");
        EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.out;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << ": " << r.out;
        EXPECT_NE(r.out.find("error: --device=cuda: "), std::string::npos) << r.out;
        if (!built) {
            EXPECT_NE(r.out.find("built without the CUDA backend"), std::string::npos) << r.out;
        }
        EXPECT_FALSE(fs::exists(out)) << cmd;
    }
    const auto bad = run_bertbench("bench --mode=gemm --device=tpu");
    EXPECT_EQ(bad.exit_code, 1) << bad.out;
    EXPECT_NE(bad.out.find("--device: expected cpu, cuda or cuda:N, got \"tpu\""), std::string::npos) << bad.out;
}

TEST(UsabilityCli, ShortRunSaysThroughputWasNotMeasuredAndFloatsStayAsGiven) {
    const fs::path dir = fs::temp_directory_path() / ("bb_usability_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "bert_config.json")
        << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 128, "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02,
              "max_position_embeddings": 512, "type_vocab_size": 2})";
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string data =
        std::string(s ? s : "/work/shared") + "/golden/pretraining/public_128_s12345_d2.tfrecord";
    const auto r = run_bertbench("pretrain --bert_config_file=" + (dir / "bert_config.json").string() +
                                 " --input_file=" + data + " --output_dir=" + (dir / "run").string() +
                                 " --train_batch_size=2 --num_train_steps=2 --num_warmup_steps=1"
                                 " --nodo_eval --threads=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // a figure of exactly 0.0 (" 0.0 seq/s"), not one that ends in it ("60.0 seq/s" is a real rate)
    EXPECT_EQ(r.out.find(" 0.0 seq/s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("throughput not measured (every update was among the first 3 left out "
                         "as warm-up;"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("s] \n"), std::string::npos) << "an empty log line:\n" << r.out;
    const json res = json::parse(slurp((dir / "run/results.json").string()));
    EXPECT_TRUE(res["train_sequences_per_second"].is_null());
    EXPECT_GT(res["train_sequences_per_second_including_warmup"].get<double>(), 0);
    const std::string cfg = slurp((dir / "run/config.json").string());
    EXPECT_NE(cfg.find("\"hidden_dropout_prob\": 0.1,"), std::string::npos) << cfg;
    EXPECT_NE(cfg.find("\"initializer_range\": 0.02,"), std::string::npos) << cfg;
    EXPECT_EQ(cfg.find("0.10000000149011612"), std::string::npos) << cfg;
    fs::remove_all(dir);
}

// prepare on a single file shows progress (with --verbose when stderr is not a terminal) and
// still writes the reference's bytes; without it stderr carries only the reference's lines.
TEST(UsabilityCli, PrepareSingleFileShowsProgress) {
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string g = std::string(s ? s : "/work/shared") + "/golden/";
    const std::string out = ::testing::TempDir() + "/bb_prepare_progress.tfrecord";
    const std::string cmd = "prepare --input_file=" + g + "corpus_public.txt --output_file=" + out +
                            " --vocab_file=" + g + "vocab.txt --do_lower_case=True"
                            " --max_seq_length=128 --max_predictions_per_seq=20"
                            " --random_seed=12345 --dupe_factor=2";
    const auto v = run_bertbench(cmd + " --verbose");
    ASSERT_EQ(v.exit_code, 0) << v.out;
    for (const char* want : {"prepare: read+tokenize ", " MB/s, ETA ", "prepare: read+tokenized ",
                             "creating instances from "})
        EXPECT_NE(v.out.find(want), std::string::npos) << want << "\n" << v.out;
    EXPECT_TRUE(slurp(out) == slurp(g + "pretraining/public_128_s12345_d2.tfrecord"));
    const auto q = run_bertbench(cmd);
    ASSERT_EQ(q.exit_code, 0) << q.out;
    std::istringstream lines(q.out);  // the reference's lines only (paths differ from the golden)
    int n = 0;
    for (std::string line; std::getline(lines, line); ++n)
        EXPECT_EQ(line.rfind("INFO:tensorflow:", 0), 0u) << line;
    EXPECT_GT(n, 20);
    std::remove(out.c_str());
}

// A corpus with bytes that are not UTF-8: dropped as convert_to_unicode drops them, with one warning
// naming the file, the line count and the first place (google's script under Python 3 stops there).
TEST(UsabilityCli, PrepareWarnsOnceAboutInvalidUtf8) {
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string g = std::string(s ? s : "/work/shared") + "/golden/";
    const std::string corpus = ::testing::TempDir() + "/bb_bad_utf8.txt", out = corpus + ".tfrecord";
    std::ofstream(corpus) << "Hello world.\nBad \xff byte here.\n\nAnother doc \xc3 x.\n";
    const auto r = run_bertbench("prepare --input_file=" + corpus + " --output_file=" + out + " --vocab_file=" + g +
                                 "vocab.txt --max_seq_length=32 --max_predictions_per_seq=5");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string want = corpus + ": 2 line(s) hold bytes that are not UTF-8 (the first on line 2, byte offset 17)";
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("not UTF-8"), r.out.rfind("not UTF-8")) << r.out;  // once
    std::remove(corpus.c_str());
    std::remove(out.c_str());
}

// Out of memory is never bare: under a 4 GB address-space limit a BERT-base arena for 512 x 512
// tokens cannot be allocated; the error names it, its size, the batch and the flags that shrink it.
TEST(UsabilityCli, OutOfMemoryNamesWhatHowLargeAndTheFlags) {
    if (testing::kAddressSanitizer)
        GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
    const fs::path dir = fs::temp_directory_path() / ("bb_oom_" + std::to_string(getpid()));
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string data =
        std::string(s ? s : "/work/shared") + "/golden/pretraining/public_512_s12345_d1.tfrecord";
    const std::string cmd = "ulimit -v 4000000; " + testing::bertbench_path() +
                            " pretrain --model=base --input_file=" + data + " --output_dir=" +
                            dir.string() + " --train_batch_size=512 --max_seq_length=512"
                            " --max_predictions_per_seq=76 --nodo_eval --threads=1 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    const int status = pclose(pipe);
    EXPECT_NE(status, 0) << out;
    for (const char* want : {"error: out of memory allocating the training activation arena (about ",
                             "= 512 x ", "MiB per sequence", "training batch 512",
                             "sequence length 512", "--steps_per_update", "--eval_batch_size"})
        EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
    fs::remove_all(dir);
}

// A directory where a file is expected is named as such (issue 25 item 10): not "not valid
// JSON", "the vocabulary is empty" or "cannot finish writing ... (is the disk full?)". One line,
// exit 1, before any output.
TEST(UsabilityCli, ADirectoryWhereAFileIsExpectedIsNamedAsSuch) {
    const testing::TmpDir tmp("bb_usability_isdir");
    const std::string dir = tmp.file("d"), out = tmp.file("out");
    fs::create_directories(dir);
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string g = std::string(s ? s : "/work/shared") + "/golden/";
    const std::vector<std::pair<std::string, std::string>> cases{
        {"squad --vocab_file=" + dir + " --output_dir=" + out + " --do_predict --features_only"
         " --predict_file=" + g + "squad/dataset-v1.1.json",
         "--vocab_file=" + dir + ": is a directory, expected a file (vocab.txt"},
        {"prepare --vocab_file=" + dir + " --input_file=" + g + "corpus_public.txt --output_file=" + out,
         "--vocab_file=" + dir + ": is a directory, expected a file (vocab.txt"},
        {"squad --vocab_file=" + g + "vocab.txt --output_dir=" + out + " --do_predict"
         " --features_only --predict_file=" + dir,
         "--predict_file=" + dir + ": is a directory, expected a file (SQuAD JSON"},
        {"pretrain --bert_config_file=" + dir + " --input_file=" + g +
         "pretraining/public_128_s12345_d2.tfrecord --output_dir=" + out,
         dir + ": is a directory, expected a file"},
        {"squad-eval " + dir + " " + g + "squad/predictions.json", dir + ": is a directory, expected a file"},
        // a device is read until memory runs out
        {"pretrain --bert_config_file=/dev/zero --input_file=" + g +
         "pretraining/public_128_s12345_d2.tfrecord --output_dir=" + out,
         "/dev/zero: is a character device, expected a file"},
        {"pick-eval --input_tfrecord=" + g + "pretraining/public_128_s12345_d2.tfrecord"
         " --output_tfrecord=" + dir + " --num_examples_to_pick=2",
         "--output_tfrecord=" + dir + ": is a directory, expected a file name"},
        {"pick-eval --input_tfrecord=" + g + "pretraining/public_128_s12345_d2.tfrecord"
         " --output_tfrecord=" + out + "/picked.tfrecord --num_examples_to_pick=2",
         "--output_tfrecord=" + out + "/picked.tfrecord: its directory " + out + " does not exist"}};
    for (const auto& [cmd, want] : cases) {
        const auto r = run_bertbench(cmd);
        EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.out;
        EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << "\n" << r.out;
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
        for (const char* wrong : {"not valid JSON", "vocabulary is empty", "disk full"})
            EXPECT_EQ(r.out.find(wrong), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(out)) << cmd;
    }
}

// A start that fails after the output directory was made leaves no empty directory behind (nor
// the parents it made); a directory that was there before stays.
TEST(UsabilityCli, AFailedStartLeavesNoEmptyOutputDirectory) {
    const testing::TmpDir tmp("bb_usability_cleanup");
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string g = std::string(s ? s : "/work/shared") + "/golden/";
    const std::string bad_json = tmp.file("train.json");
    std::ofstream(bad_json) << "{\"data\": [";
    const auto squad = [&](const std::string& out) {
        return run_bertbench("squad --vocab_file=" + g + "vocab.txt --output_dir=" + out +
                             " --do_train --features_only --train_file=" + bad_json);
    };
    auto r = squad(tmp.file("a/b/c"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(bad_json), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp.file("a"))) << r.out;
    fs::create_directories(tmp.file("kept"));
    r = squad(tmp.file("kept"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(fs::is_directory(tmp.file("kept")));
    // pretrain: the records are seq 128; the flag says 64 (found when the data is opened).
    r = run_bertbench("pretrain --model=tiny --input_file=" + g +
                      "pretraining/public_128_s12345_d2.tfrecord --output_dir=" + tmp.file("p/q") +
                      " --max_seq_length=64 --nodo_eval --threads=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("max_seq_length"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(tmp.file("p"))) << r.out;
}

// squad-eval with predictions of another dataset: the official output (every question scores 0)
// and one warning that no prediction id is a question of the dataset; none when they match.
TEST(UsabilityCli, SquadEvalWarnsOnceWhenNoPredictionIdMatches) {
    const testing::TmpDir tmp("bb_usability_squad_eval");
    const char* s = std::getenv("BB_SHARED_DIR");
    const std::string g = std::string(s ? s : "/work/shared") + "/golden/squad/";
    std::ofstream(tmp.file("other.json")) << R"({"t01": "x", "q2": "y"})";
    auto r = run_bertbench("squad-eval " + g + "dataset-v1.1.json " + tmp.file("other.json"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("none of its"), std::string::npos) << "one id matches\n" << r.out;
    std::ofstream(tmp.file("other.json")) << R"({"q1": "x", "q2": "y"})";
    r = run_bertbench("squad-eval " + g + "dataset-v1.1.json " + tmp.file("other.json"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const std::string warning = tmp.file("other.json") + ": none of its 2 prediction id(s) is a "
                                "question id of " + g + "dataset-v1.1.json (";
    const size_t at = r.out.find(warning);
    EXPECT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(warning, at + 1), std::string::npos) << "twice\n" << r.out;
    EXPECT_NE(r.out.find("{\"exact_match\": 0.0, \"f1\": 0.0}"), std::string::npos) << r.out;
    r = run_bertbench("squad-eval " + g + "dataset-v1.1.json " + g + "predictions.json");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("none of its"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench
