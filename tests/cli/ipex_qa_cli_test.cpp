// Intel model zoo's PyTorch BERT-base SQuAD inference lines (quickstart/language_modeling/pytorch/
// bert_base/inference/cpu/run_accuracy.sh, run_multi_instance_throughput.sh,
// run_multi_instance_realtime.sh: `python -m intel_extension_for_pytorch.cpu.launch ... run_qa.py
// ...`, transformers 4.10's script with Intel's patch) run with the launcher's module replaced by
// scripts/ipex_launch.py, sizes shrunk, on a fine-tuned model in save_pretrained's layout and
// $SQUAD_DIR standing for the hub's squad dataset. Each instance prints the script's Throughput
// line (its formula over bertbench's time of each batch) and its metrics block, which the
// quickstarts grep; the script's files land in --output_dir. Lines it cannot map are one-line
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "core/fs.hpp"
#include "core/py_json.hpp"

namespace bertbench::ipex_qa_test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::golden;
using testing::run_shell;
using testing::slurp;
using testing::TmpDir;

// $FINETUNED_MODEL, and $SQUAD_DIR with dev-v1.1.json (the SQuAD golden's 45 questions).
struct QaModel {
    TmpDir tmp{"bb_ipex_qa"};
    std::string model = tmp.file("bert_base_squad"), squad_dir = tmp.file("squad");
    QaModel() {
        testing::write_tiny_squad_hf_dir(model, tmp.file("ckpt.safetensors"));
        fs::create_directories(squad_dir);
        fs::copy_file(golden("squad/dataset-v1.1.json"), squad_dir + "/dev-v1.1.json");
    }
    std::string env() const { return "SQUAD_DIR=" + squad_dir; }
    // The quickstarts' run_qa.py words (sequence shrunk).
    std::string words(const std::string& out, const std::string& extra) const {
        return "./transformers/examples/pytorch/question-answering/run_qa.py --use_ipex "
               "--jit_mode " +
               extra + " --model_name_or_path " + model +
               " --dataset_name squad --do_eval --max_seq_length 64 --doc_stride 16 --output_dir " +
               out + "/tmp";
    }
    // ipex_launch.py `launcher` flags, then the words with `extra`, `env` added to $SQUAD_DIR:
    // expects success and one bertbench run, whose instance 0 directory goes to *run ("" after a
    // failed expectation).
    void launch(const std::string& launcher, const std::string& out, const std::string& extra,
                const std::string& env, std::string* run) const {
        run->clear();
        const auto r = testing::run_script("ipex_launch.py", launcher + " " + words(out, extra),
                                           this->env() + " " + env);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const auto runs = testing::matching_files(out + "/tmp", "bertbench-[0-9]{14}");
        ASSERT_EQ(runs.size(), 1u);
        *run = runs[0] + "/instance_0";
    }
};

// The script's Throughput line from one bertbench run's batch times.
std::string throughput_line(const std::string& run, int batch) {
    const json speed = json::parse(slurp(run + "/predict_speed.json"));
    const auto& t = speed["batch_seconds"];
    double sum = 0;
    for (size_t i = 10; i < t.size(); ++i) sum += t[i].get<double>();
    return fmt::format("Throughput: {:.3f} sentence/s\n",
                       batch * static_cast<double>(t.size() - 10) / sum);
}

TEST(IpexQa, AccuracyLinePrintsTheMetricsBlockTheQuickstartGreps) {
    const QaModel m;
    const std::string out = m.tmp.file("output");
    std::string run;
    m.launch("--enable_jemalloc --log_path=" + out + " --log_file_prefix=accuracy_log_fp32_jit",
             out, "--per_device_eval_batch_size 4", "", &run);
    if (run.empty()) return;
    const auto own =
        testing::matching_files(out, "accuracy_log_fp32_jit_[0-9]{14}_instances\\.log");
    ASSERT_EQ(own.size(), 1u);
    for (const char* flag :
         {" squad --do_predict --transformers_qa ", " --predict_batch_size=4 ",
          " --max_seq_length=64 ", " --doc_stride=16 ", " --do_lower_case=true ", " --dtype=fp32 "})
        EXPECT_NE(slurp(own[0]).find(flag), std::string::npos) << flag << slurp(own[0]);
    const auto logs = testing::matching_files(
        out, "accuracy_log_fp32_jit_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    ASSERT_EQ(logs.size(), 1u);
    const std::string log = slurp(logs[0]);
    // 45 questions at 64/16: more features than questions, batches of 4, the Throughput line
    const json speed = json::parse(slurp(run + "/predict_speed.json"));
    const int features = speed["sequences"].get<int>();
    EXPECT_GT(features, 45);
    EXPECT_EQ(speed["batch_seconds"].size(), static_cast<size_t>((features + 3) / 4));
    EXPECT_NE(log.find(throughput_line(run, 4)), std::string::npos) << log;
    EXPECT_TRUE(std::regex_search(
        log,
        std::regex("\n[0-9]{2}/[0-9]{2}/[0-9]{4} [0-9:]{8} - INFO - utils_qa - Post-processing "
                   "45 example predictions split into " +
                   std::to_string(features) + " features\\.\n")))
        << log;
    // the metrics block: log_metrics' layout, the datasets squad metric rounded to 4 places
    const json metric = json::parse(slurp(run + "/eval_results.json"));
    // Python's round(v, 4): the exact value rounded to 4 places, read back as a float
    const auto shown = [](double v) { return py_float_repr(std::stod(fmt::format("{:.4f}", v))); };
    const std::string em = shown(metric["exact_match"].get<double>()),
                      f1 = shown(metric["f1"].get<double>()), n = std::to_string(features);
    const size_t w = std::max({em.size(), f1.size(), n.size()});
    const auto pad = [&](const std::string& v) { return std::string(w - v.size(), ' ') + v; };
    EXPECT_NE(
        log.find("***** eval metrics *****\n  eval_exact_match = " + pad(em) +
                 "\n  eval_f1          = " + pad(f1) + "\n  eval_samples     = " + pad(n) + "\n"),
        std::string::npos)
        << log;
    // run_accuracy.sh's grep | sed
    EXPECT_EQ(run_shell("cat " + out +
                        "/accuracy_log* | grep \"eval_exact_match\" | sed -e "
                        "'s/.*= //;s/[^0-9.]//g'")
                  .out,
              em + "\n");
    EXPECT_EQ(run_shell("cat " + out +
                        "/accuracy_log* | grep \"eval_f1\" | sed -e 's/.*= //;s/[^0-9.]//g'")
                  .out,
              f1 + "\n");
    // the script's files in --output_dir
    EXPECT_EQ(slurp(out + "/tmp/eval_predictions.json"), slurp(run + "/predictions.json"));
    EXPECT_EQ(slurp(out + "/tmp/eval_nbest_predictions.json"),
              slurp(run + "/nbest_predictions.json"));
    const json saved = json::parse(slurp(out + "/tmp/eval_results.json"));
    EXPECT_EQ(saved["eval_exact_match"], metric["exact_match"]);
    EXPECT_EQ(saved["eval_samples"], features);
    EXPECT_EQ(json::parse(slurp(out + "/tmp/all_results.json")), saved);
}

TEST(IpexQa, RealtimeLineCutsQuestionsThenFeatures) {
    // run_multi_instance_realtime.sh: batch 1, --max_eval_samples (here 12): 12 questions, then
    // the first 12 of their features, 12 batches, the last 2 timed
    const QaModel m;
    const std::string out = m.tmp.file("output");
    std::string run;
    m.launch("--ninstances 1 --log_path=" + out + " --log_file_prefix=./latency_log_fp32_jit", out,
             "--max_eval_samples 12 --per_device_eval_batch_size 1", "OMP_NUM_THREADS=1", &run);
    if (run.empty()) return;
    const json speed = json::parse(slurp(run + "/predict_speed.json"));
    EXPECT_EQ(speed["sequences"], 12);
    EXPECT_EQ(speed["threads"], 1);
    const auto logs = testing::matching_files(
        out, "latency_log_fp32_jit_[0-9]{14}_instance_0_cores_[-0-9_]+\\.log");
    ASSERT_EQ(logs.size(), 1u);
    const std::string log = slurp(logs[0]);
    EXPECT_NE(log.find(throughput_line(run, 1)), std::string::npos) << log;
    // the 12 questions keep their place in the predictions even where their features were cut
    EXPECT_EQ(json::parse(slurp(out + "/tmp/eval_predictions.json")).size(), 12u);
    EXPECT_NE(log.find("Post-processing 12 example predictions split into 12 features."),
              std::string::npos);
}

// What the mapping does not run: one line naming the flag and why, exit 1, nothing written.
TEST(IpexQa, UnmappedLinesAreRefusedBeforeAnythingRuns) {
    const QaModel m;
    const std::string out = m.tmp.file("output");
    const std::string line = m.words(out, "--per_device_eval_batch_size 2");
    const auto refused = [&](const std::string& args, const std::string& why,
                             const std::string& env) {
        const auto r = testing::run_script("ipex_launch.py", "--log_path=" + out + " " + args, env);
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_NE(r.out.find("ipex_launch.py: error: " + why), std::string::npos) << r.out;
        EXPECT_EQ(testing::count_of(r.out, "\n"), 1u) << r.out;
        EXPECT_FALSE(fs::exists(out)) << args;
    };
    refused(line + " --do_train", "--do_train: run_qa.py's fine-tuning is not mapped", m.env());
    std::string no_eval = line;
    no_eval.erase(no_eval.find(" --do_eval"), 10);
    refused(no_eval, "--do_eval: expected", m.env());
    refused(line + " --fp16", "--fp16: the script raises ValueError on a CPU", m.env());
    refused(line + " --max_seq_len 64 --pad_to_max 0 --warp 3",
            "Some specified arguments are not used by the HfArgumentParser: ['--warp', '3']",
            m.env());
    refused(line + " --per_device_eval_batch_size=two",
            "run_qa.py: argument --per_device_eval_batch_size: invalid int value: 'two'", m.env());
    refused(line + " --version_2_with_negative maybe",
            "run_qa.py: argument --version_2_with_negative: Truthy value expected: got maybe",
            m.env());
    refused(line, "--dataset_name squad: the hub is not fetched; SQUAD_DIR=", "");
    std::string abbreviated = line;
    abbreviated.replace(abbreviated.find("--use_ipex"), 10, "--use_ip");
    refused(abbreviated, "--use_ipex given as --use_ip: Intel's trainer_qa.py imports IPEX only",
            m.env());
    // fewer than 11 batches: the script divides by zero after its evaluation loop
    const auto r = testing::run_script(
        "ipex_launch.py", "--log_path=" + out + " " + m.words(out, "--max_eval_samples 10"),
        m.env());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(
        r.out.find("ipex_launch.py: error: 2 batch(es) of 8: Intel's Throughput line times the "
                   "batches after the 10th and divides by zero"),
        std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(out + "/tmp/eval_predictions.json"));
    // Tokenizer settings bertbench's WordPiece would silently tokenize otherwise
    fs::remove_all(out);
    const auto with_file = [&](const std::string& name, const std::string& text, const std::string& why) {
        std::ofstream(m.model + "/" + name) << text;
        refused(line, m.model + "/" + name + ": " + why, m.env());
        fs::remove(m.model + "/" + name);
    };
    with_file("tokenizer_config.json", R"({"do_lower_case": false, "strip_accents": true})",
              "strip_accents: true, expected null or do_lower_case's value");
    with_file("tokenizer_config.json", R"({"do_lower_case": "false"})", "do_lower_case: expected true or false");
    with_file("added_tokens.json", R"({"[E1]": 30522})", "added token \"[E1]\" is not in ");
    with_file("tokenizer.json",
              R"({"normalizer": {"type": "BertNormalizer", "clean_text": false}, "model": {"type": "WordPiece"}})",
              "normalizer clean_text: false, expected true");
    with_file("tokenizer.json", R"({"normalizer": {"type": "BertNormalizer"}, "model": {"type": "BPE"}})",
              "model type: \"BPE\", expected \"WordPiece\"");
    // bert-base-uncased's own tokenizer.json (its specials in the vocabulary) runs
    std::ofstream(m.model + "/tokenizer.json")
        << R"({"added_tokens": [{"content": "[CLS]"}, {"content": "[SEP]"}], "normalizer": {"type": "BertNormalizer",)"
           R"( "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},)"
           R"( "model": {"type": "WordPiece", "max_input_chars_per_word": 100, "vocab": {"[CLS]": 101, "the": 1996}}})";
    const auto ok = testing::run_script("ipex_launch.py", "--log_path=" + out + " " + line, m.env());
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

}  // namespace
}  // namespace bertbench::ipex_qa_test
