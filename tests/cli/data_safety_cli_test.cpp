// Bad input never costs data and fails before the work starts (issue 14 §2, §3), on the real
// binary: an output that is an input (same name, symlink or hard link) is refused before anything
// is written; stale temporaries of dead processes are removed; globs skip bertbench's own
// temporaries and sidecars; resume refuses changed hyper-parameters unless told; a corrupt record
// mid-run aborts with results.json and a compliant run_stop, and the rerun starts a fresh log;
// NaN weights, a bad eval set, a truncated shard, records of a larger vocabulary and a stray
// checkpoint name fail before the first step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_of;
using testing::golden;
using testing::run_bertbench;
using testing::shared_dir;
using testing::slurp;

// The one "error: ..." line of a failed run ("" when there is none).
std::string error_line(const std::string& out) {
    const size_t at = out.find("error: ");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// A pid that cannot be running: above the kernel's pid_max (at most 2^22).
constexpr const char* kDeadPid = "99999999";

struct Workdir {
    fs::path dir;
    explicit Workdir(const std::string& name) {
        dir = fs::temp_directory_path() / ("bb_safety_" + name + "_" + std::to_string(getpid()));
        fs::remove_all(dir);
        fs::create_directories(dir);
        std::ofstream(dir / "bert_config.json")
            << R"({"vocab_size": 30522, "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128,
                  "max_position_embeddings": 512, "type_vocab_size": 2})";
    }
    ~Workdir() { fs::remove_all(dir); }
    std::string p(const std::string& name) const { return (dir / name).string(); }
};

std::string pretrain(const Workdir& w, const std::string& out, const std::string& input) {
    return "pretrain --bert_config_file=" + w.p("bert_config.json") + " --input_file='" + input +
           "' --output_dir=" + out + " --train_batch_size=4 --num_train_steps=4"
           " --num_warmup_steps=1 --learning_rate=1e-3 --save_checkpoints_steps=2 --nodo_eval"
           " --threads=1";
}

TEST(DataSafetyCli, OutputThatIsAnInputIsRefusedBeforeWriting) {
    const Workdir w("same");
    const std::string input = w.p("eval.tfrecord");
    fs::copy_file(golden("eval_pick/public_128_eval100.tfrecord"), input);
    const std::string before = slurp(input);
    fs::create_symlink(input, w.p("link.tfrecord"));
    fs::create_hard_link(input, w.p("hard.tfrecord"));
    for (const std::string& out : {input, w.p("link.tfrecord"), w.p("hard.tfrecord"),
                                  w.p("./eval.tfrecord")}) {
        const auto r = run_bertbench("pick-eval --input_tfrecord=" + input + " --output_tfrecord=" +
                                     out + " --num_examples_to_pick=10 --max_seq_length=128 "
                                     "--max_predictions_per_seq=20");
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_line(r.out).find("is the same file as the input --input_tfrecord"),
                  std::string::npos) << r.out;
        EXPECT_EQ(slurp(input), before) << out;
    }

    // prepare --output_file=<the corpus>, and --log_file=<the vocabulary>.
    const std::string corpus = w.p("corpus.txt");
    fs::copy_file(golden("corpus_public.txt"), corpus);
    const std::string text = slurp(corpus);
    const std::string vocab = golden("vocab.txt");
    const auto r = run_bertbench("prepare --input_file=" + corpus + " --output_file=" + corpus +
                                 " --vocab_file=" + vocab);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("--output_file=" + corpus + ": is the same file as the "
                                     "input --input_file"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(corpus), text);
    const auto l = run_bertbench("prepare --input_file=" + corpus + " --output_file=" +
                                 w.p("out.tfrecord") + " --vocab_file=" + vocab +
                                 " --log_file=" + vocab);
    EXPECT_EQ(l.exit_code, 1) << l.out;
    EXPECT_NE(error_line(l.out).find("--log_file="), std::string::npos) << l.out;
    EXPECT_FALSE(fs::exists(w.p("out.tfrecord")));

    // eval --json=<the eval records>.
    const model::ParamTable table(model::BertConfig::from_json_file(w.p("bert_config.json")),
                                  model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 1);
    model::save_checkpoint(w.p("init.safetensors"), table, params);
    const auto e = run_bertbench("eval --init_checkpoint=" + w.p("init.safetensors") +
                                 " --input_file=" + input + " --json=" + w.p("link.tfrecord"));
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_NE(error_line(e.out).find("--json="), std::string::npos) << e.out;
    EXPECT_EQ(slurp(input), before);

    // pretrain with an eval file that is (a hard link to) the mlperf.log its --output_dir would get:
    // the message names the directory, the file the run writes there and the input.
    fs::create_directories(w.p("run"));
    fs::create_hard_link(input, w.p("run/mlperf.log"));
    const auto p = run_bertbench(pretrain(w, w.p("run"), input) + " --eval_input_file=" + w.p("run/mlperf.log"));
    EXPECT_EQ(p.exit_code, 1) << p.out;
    EXPECT_NE(error_line(p.out).find("--output_dir=" + w.p("run") + ": the run writes its mlperf.log there, and that "
                                     "is the input file " + input + " (the same file); writing it would destroy the input"),
              std::string::npos) << p.out;
    EXPECT_EQ(slurp(input), before);
}

// Two outputs of one run that are the same file: one would destroy the other (the log over the
// records; two writers of one temporary leaving half the records under the final name; the
// dllogger stream over the run's own results or checkpoint).
TEST(DataSafetyCli, OutputsOfOneRunMustBeDifferentFiles) {
    const Workdir w("outputs");
    const std::string prepare = "prepare --input_file=" + golden("corpus_public.txt") + " --vocab_file=" +
                                golden("vocab.txt") + " --dupe_factor=1";
    auto r = run_bertbench(prepare + " --output_file=" + w.p("a.tfrecord") + " --log_file=" + w.p("a.tfrecord"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("--log_file=" + w.p("a.tfrecord") + ": the same file"), std::string::npos)
        << r.out;
    r = run_bertbench(prepare + " --output_file=" + w.p("a.tfrecord") + "," + w.p("./a.tfrecord"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("--output_file: names the file " + w.p("a.tfrecord") + " twice"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("a.tfrecord")));
    // An empty item (the reference would fail writing ""): refused, not dropped from the round-robin.
    for (const std::string& list : {w.p("a.tfrecord") + ",", w.p("a.tfrecord") + ",," + w.p("b.tfrecord")}) {
        r = run_bertbench(prepare + " --output_file=" + list);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_line(r.out).find("found an empty item"), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(w.p("a.tfrecord")));
    }
    // Shard mode keeps no reference log: --log_file there is refused, not silently unwritten.
    fs::create_directories(w.p("in"));
    fs::copy_file(golden("corpus_public.txt"), w.p("in/corpus.txt"));
    r = run_bertbench("prepare --input_dir=" + w.p("in") + " --output_dir=" + w.p("shards") + " --vocab_file=" +
                      golden("vocab.txt") + " --dupe_factor=1 --log_file=" + w.p("shard.log"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("--log_file=" + w.p("shard.log") + ": expected with --input_file/--output_file; "
                                     "shard mode (--input_dir) keeps no reference log"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("shards")));
    EXPECT_FALSE(fs::exists(w.p("shard.log")));
    r = run_bertbench(prepare + " --output_file=" + w.p("a.tfrecord") + " --dupe_factor=0");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("--dupe_factor: expected >= 1"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("a.tfrecord")));
    const std::string data = golden("pretraining/public_128_s12345_d2.tfrecord");
    for (const char* own : {"results.json", "model.ckpt-4.safetensors", "mlperf.log"}) {
        r = run_bertbench(pretrain(w, w.p("run"), data) + " --json-summary=" + w.p("run/") + own);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_line(r.out).find(std::string("is the run's own ") + own + " in --output_dir="),
                  std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(w.p("run")));
    }
    // Another name in the run's directory is fine.
    r = run_bertbench(pretrain(w, w.p("run"), data) + " --json-summary=" + w.p("run/dllogger.json"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(slurp(w.p("run/dllogger.json")).rfind("DLLL {", 0), 0u);
}

// Shard mode opens every input before the first shard: an unreadable one (run as nobody when the
// test runs as root, whom permissions do not stop) or a link to a missing file is one line before
// any shard is made, not an error at its turn after the others (the link was skipped without a word).
TEST(DataSafetyCli, ShardModeChecksEveryInputFirst) {
    const Workdir w("shard_inputs");
    fs::create_directories(w.p("in"));
    fs::copy_file(golden("corpus_public.txt"), w.p("in/a.txt"));
    fs::copy_file(golden("corpus_public.txt"), w.p("in/b.txt"));
    fs::copy_file(golden("vocab.txt"), w.p("vocab.txt"));
    std::string bin = testing::bertbench_path();
    if (::geteuid() == 0) {  // nobody runs a copy here: the build tree may be closed to it
        fs::copy_file(bin, w.p("bertbench"));
        fs::permissions(w.dir, fs::perms::all);
        bin = "setpriv --reuid=65534 --regid=65534 --clear-groups " + w.p("bertbench");
    }
    fs::permissions(w.p("in"), fs::perms::all);
    fs::permissions(w.p("in/b.txt"), fs::perms::none);
    const std::string cmd = bin + " prepare --input_dir=" + w.p("in") + " --output_dir=" + w.p("in/../out") +
                            " --vocab_file=" + w.p("vocab.txt") + " --dupe_factor=1 --max_seq_length=32";
    auto r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(error_line(r.out), "error: --input_dir: " + w.p("in/b.txt") +
                                     ": cannot open: Permission denied (expected every input file readable)") << r.out;
    EXPECT_FALSE(fs::exists(w.p("out")));
    fs::permissions(w.p("in/b.txt"), fs::perms::owner_read | fs::perms::others_read);
    fs::create_symlink("gone.txt", w.p("in/c.txt"));
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(error_line(r.out), "error: --input_dir: " + w.p("in/c.txt") +
                                     ": a symbolic link to gone.txt, which leads nowhere (a missing target or a loop; expected "
                                     "input files)") << r.out;
    EXPECT_FALSE(fs::exists(w.p("out")));
    fs::remove(w.p("in/c.txt"));
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(fs::exists(w.p("out/a.tfrecord")) && fs::exists(w.p("out/b.tfrecord"))) << r.out;
    // A dead process's temporary of this run's outputs is removed; another file named like a
    // temporary (another run's, another host's) is not
    std::ofstream(w.p("out/a.tfrecord.tmp.999999999")) << "killed";
    std::ofstream(w.p("out/notes.tmp.999999999")) << "someone else's";
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_FALSE(fs::exists(w.p("out/a.tfrecord.tmp.999999999"))) << r.out;
    EXPECT_TRUE(fs::exists(w.p("out/notes.tmp.999999999"))) << r.out;
    // An input renamed since: its old shard stays, and is named (a run over the directory reads it)
    fs::rename(w.p("in/b.txt"), w.p("in/z.txt"));
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("1 shard(s) there no file of --input_dir makes now (its input renamed or removed), e.g. " +
                         w.p("in/../out/b.tfrecord") + ":"), std::string::npos) << r.out;
    fs::rename(w.p("in/z.txt"), w.p("in/b.txt"));
    // An output name that is a link to an input or the vocabulary: refused before any shard, the
    // input intact (it was overwritten, exit 0)
    const std::string a = testing::slurp(w.p("in/a.txt"));
    fs::remove_all(w.p("out"));
    fs::create_directories(w.p("out"));
    fs::permissions(w.p("out"), fs::perms::all);
    fs::create_symlink("../in/a.txt", w.p("out/b.tfrecord"));
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(error_line(r.out), "error: --output_dir: " + w.p("in/../out/b.tfrecord") + ": is the same file as the input " +
                                     w.p("in/a.txt") + " (a link); writing the shard would destroy the input (expected no "
                                     "such file, or a shard of an earlier run)") << r.out;
    EXPECT_EQ(testing::slurp(w.p("in/a.txt")), a);
    fs::remove(w.p("out/b.tfrecord"));
    fs::create_symlink("../vocab.txt", w.p("out/a.tfrecord.meta.json"));
    r = testing::run_shell(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("is the same file as the input " + w.p("vocab.txt")), std::string::npos) << r.out;
}

TEST(DataSafetyCli, StaleTemporariesAreRemovedAndGlobsSkipOwnFiles) {
    const Workdir w("tmp");
    const std::string input = golden("eval_pick/public_128_eval100.tfrecord");
    const std::string out = w.p("picked.tfrecord");
    const std::string stale = out + ".tmp." + kDeadPid;
    const std::string live = out + ".tmp." + std::to_string(getpid());  // this test runs
    std::ofstream(stale) << "half-written";
    std::ofstream(live) << "being written";
    // More records asked for than the input has: a warning, the reference's repeating picks.
    const auto r = run_bertbench("pick-eval --input_tfrecord=" + input + " --output_tfrecord=" +
                                 out + " --num_examples_to_pick=150 --max_seq_length=128 "
                                 "--max_predictions_per_seq=20");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(live));
    EXPECT_NE(r.out.find("removed " + stale), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("warning: --num_examples_to_pick=150: more than the 100 records"),
              std::string::npos) << r.out;
    fs::remove(live);

    // A glob over a directory with a shard, its temporaries and a sidecar reads the shard only.
    fs::create_directories(w.p("data"));
    fs::copy_file(golden("pretraining/public_128_s12345_d2.tfrecord"), w.p("data/a.tfrecord"));
    std::ofstream(w.p("data/a.tfrecord.tmp.") + kDeadPid) << "junk";
    std::ofstream(w.p("data/a.tfrecord.meta.json")) << "{}";
    const auto t = run_bertbench(pretrain(w, w.p("run"), w.p("data/*")));
    ASSERT_EQ(t.exit_code, 0) << t.out;
    EXPECT_NE(t.out.find("not reading 2 of bertbench's own temporary/sidecar files"),
              std::string::npos) << t.out;
    EXPECT_EQ(json::parse(slurp(w.p("run/config.json")))["train_files"].size(), 1u);
    const auto only = run_bertbench(pretrain(w, w.p("run2"), w.p("data/*.json")));
    EXPECT_EQ(only.exit_code, 1);
    EXPECT_NE(error_line(only.out).find("matches only bertbench's own"), std::string::npos)
        << only.out;
}

TEST(DataSafetyCli, ResumeRefusesChangedHyperParametersUnlessAllowed) {
    const Workdir w("resume");
    const std::string data = golden("pretraining/public_128_s12345_d2.tfrecord");
    const std::string base = pretrain(w, w.p("run"), data);
    ASSERT_EQ(run_bertbench(base + " --stop_steps=2").exit_code, 0);  // paused at step 2 of 4
    const auto r = run_bertbench(base + " --learning_rate=2e-3 --lamb_beta_1=0.8");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    const std::string e = error_line(r.out);
    EXPECT_NE(e.find("2 flag(s) or file(s) changed"), std::string::npos) << e;
    EXPECT_NE(e.find("--learning_rate (checkpoint 0.001, now 0.002)"), std::string::npos) << e;
    EXPECT_NE(e.find("--lamb_beta_1 (checkpoint 0.9, now 0.8)"), std::string::npos) << e;
    EXPECT_NE(e.find("--allow_changed_flags"), std::string::npos) << e;
    // evaluations turned on at a resume: a changed flag too (its mlperf.log would gain them halfway)
    const auto evals = run_bertbench(base + " --do_eval --eval_input_file=" + data);
    EXPECT_EQ(evals.exit_code, 1) << evals.out;
    EXPECT_NE(error_line(evals.out).find("--do_eval (checkpoint false, now true)"), std::string::npos) << evals.out;
    // a smaller batch is named as the changed flag, not as a run state that looks damaged
    const auto half = run_bertbench(base + " --train_batch_size=2");
    EXPECT_EQ(half.exit_code, 1) << half.out;
    EXPECT_NE(error_line(half.out).find("--train_batch_size: expected 4 as in the checkpoint"), std::string::npos)
        << half.out;

    const auto a = run_bertbench(base + " --learning_rate=2e-3 --allow_changed_flags");
    ASSERT_EQ(a.exit_code, 0) << a.out;
    EXPECT_NE(a.out.find("resuming"), std::string::npos) << a.out;
    EXPECT_NE(a.out.find("warning: --allow_changed_flags: resuming"), std::string::npos) << a.out;
    const json rec = json::parse(slurp(w.p("run/changed_flags.jsonl")));
    EXPECT_EQ(rec["changes"][0]["flag"], "learning_rate");
    EXPECT_EQ(rec["changes"][0]["checkpoint"], 1e-3);
    EXPECT_EQ(rec["changes"][0]["now"], 2e-3);
    // A finished run resumed with a change allowed does nothing, and records nothing either
    fs::remove(w.p("run/changed_flags.jsonl"));
    const auto done = run_bertbench(base + " --learning_rate=3e-3 --allow_changed_flags");
    ASSERT_EQ(done.exit_code, 0) << done.out;
    EXPECT_NE(done.out.find("already finished"), std::string::npos) << done.out;
    EXPECT_FALSE(fs::exists(w.p("run/changed_flags.jsonl")));
    // Flags that do not fork the run (threads, checkpoint cadence) may change freely (from the
    // last checkpoint's, written after the allowed change).
    EXPECT_EQ(run_bertbench(base + " --learning_rate=2e-3 --threads=2 --save_checkpoints_steps=3").exit_code, 0);

    // The same input files spelled another way, from another working directory, are the same run
    // (a requeued job); a copy of the config under another name is another file: a changed flag.
    const std::string copy = w.p("data.tfrecord");
    fs::copy_file(data, copy);
    const std::string stopped = pretrain(w, w.p("run2"), copy) + " --stop_steps=2";
    ASSERT_EQ(run_bertbench(stopped).exit_code, 0);
    std::string respelled = pretrain(w, "run2", "./data.tfrecord");
    respelled.replace(respelled.find(w.p("bert_config.json")), w.p("bert_config.json").size(), "bert_config.json");
    const auto moved = testing::run_shell("cd '" + w.p(".") + "/' && " + testing::bertbench_path() + " " + respelled);
    ASSERT_EQ(moved.exit_code, 0) << moved.out;
    EXPECT_NE(moved.out.find("resuming from " + std::string("run2/model.ckpt-2.safetensors")), std::string::npos) << moved.out;
    EXPECT_EQ(json::parse(slurp(w.p("run2/results.json")))["global_step"], 4);
    fs::copy_file(w.p("bert_config.json"), w.p("config_copy.json"));
    std::string other = pretrain(w, w.p("run2"), copy);
    other.replace(other.find("bert_config.json"), 16, "config_copy.json");
    const auto o = run_bertbench(other + " --num_train_steps=6");
    EXPECT_EQ(o.exit_code, 1) << o.out;
    EXPECT_NE(error_line(o.out).find("--bert_config_file (checkpoint"), std::string::npos) << o.out;

    // A data file replaced in place under the same name (the cursors would index other records):
    // refused, naming the file and both sizes; --allow_changed_flags goes on and records it.
    const std::string swapped = w.p("swapped.tfrecord");
    fs::copy_file(data, swapped);
    const std::string third = pretrain(w, w.p("run3"), swapped);
    ASSERT_EQ(run_bertbench(third + " --stop_steps=2").exit_code, 0);
    const std::string other_data = golden("pretraining/public_128_cased_s7_d1.tfrecord");
    fs::copy_file(other_data, swapped, fs::copy_options::overwrite_existing);
    const auto s = run_bertbench(third);
    EXPECT_EQ(s.exit_code, 1) << s.out;
    EXPECT_NE(error_line(s.out).find("1 flag(s) or file(s) changed from the run being resumed: the data file " +
                                     fs::weakly_canonical(swapped).string() + " (checkpoint " +
                                     std::to_string(fs::file_size(data)) + " bytes, now " +
                                     std::to_string(fs::file_size(other_data)) + " bytes)"),
              std::string::npos) << s.out;
    const auto sa = run_bertbench(third + " --allow_changed_flags");
    ASSERT_EQ(sa.exit_code, 0) << sa.out;
    EXPECT_EQ(json::parse(slurp(w.p("run3/changed_flags.jsonl")))["changes"][0]["data_file"],
              fs::weakly_canonical(swapped).string());

    // ... and by one of the same size: the shard rewritten with its first record moved to its end
    // (a valid file, other bytes at both ends)
    const std::string fourth = pretrain(w, w.p("run4"), w.p("rotated.tfrecord"));
    fs::copy_file(data, w.p("rotated.tfrecord"));
    ASSERT_EQ(run_bertbench(fourth + " --stop_steps=2").exit_code, 0);
    std::string shard = slurp(data);
    uint64_t len = 0;
    std::memcpy(&len, shard.data(), 8);
    const size_t first = 8 + 4 + len + 4;
    std::ofstream(w.p("rotated.tfrecord"), std::ios::binary) << shard.substr(first) + shard.substr(0, first);
    ASSERT_EQ(fs::file_size(w.p("rotated.tfrecord")), fs::file_size(data));
    const auto rot = run_bertbench(fourth);
    EXPECT_EQ(rot.exit_code, 1) << rot.out;
    EXPECT_NE(error_line(rot.out).find("the data file " + fs::weakly_canonical(w.p("rotated.tfrecord")).string() +
                                       " (the same size, other bytes in its first or last 4 KiB)"),
              std::string::npos) << rot.out;
}

// A glob that matches one shard more at the resume: the checkpoint's data order indexes the old
// file list. Refused before anything in the run's directory changes; --allow_changed_flags resumes
// the weights and starts the next epoch of the new data, recorded in changed_flags.jsonl.
TEST(DataSafetyCli, AShardAddedUnderAGlobIsRefusedBeforeWritingOrStartsTheNextEpoch) {
    const Workdir w("glob_grew");
    const std::string shard = "pretraining/public_128_multi_s1_d1.tfrecord-0000";
    fs::create_directory(w.p("data"));
    for (const char* k : {"0", "1"}) fs::copy_file(golden(shard + k + "-of-00003"), w.p("data/s") + k);
    const std::string cmd = pretrain(w, w.p("run"), w.p("data/*"));
    ASSERT_EQ(run_bertbench(cmd + " --stop_steps=2").exit_code, 0);
    fs::copy_file(golden(shard + "2-of-00003"), w.p("data/s2"));
    std::vector<std::pair<std::string, std::string>> before;
    for (const auto& e : fs::directory_iterator(w.p("run"))) before.push_back({e.path().string(), slurp(e.path())});
    const auto r = run_bertbench(cmd);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("__metadata__[\"reader_state\"]: the data order cannot continue with this "
                                     "run's data and reader flags: files [\"s0\", \"s1\"] in the cursor, [\"s0\", "
                                     "\"s1\", \"s2\"] now"),
              std::string::npos) << r.out;
    for (const auto& [file, bytes] : before) EXPECT_EQ(slurp(file), bytes) << file;
    EXPECT_EQ(static_cast<size_t>(std::distance(fs::directory_iterator(w.p("run")), fs::directory_iterator())),
              before.size());

    const auto a = run_bertbench(cmd + " --allow_changed_flags");
    ASSERT_EQ(a.exit_code, 0) << a.out;
    EXPECT_NE(a.out.find("the data starts epoch 1 of the new data"), std::string::npos) << a.out;
    const json changed = json::parse(slurp(w.p("run/changed_flags.jsonl")));
    ASSERT_EQ(changed["changes"].size(), 1U) << changed;
    EXPECT_EQ(changed["changes"][0]["now_epoch"], 1) << changed;
    EXPECT_EQ(json::parse(slurp(w.p("run/results.json")))["global_step"], 4);
}

TEST(DataSafetyCli, CorruptRecordMidRunAbortsCompliantlyAndTheRerunStartsAFreshLog) {
    const Workdir w("corrupt");
    // Record 10 of the golden shard gets a flipped data byte: record 0 passes the start-up check,
    // the reader meets record 10 while filling its shuffle buffer.
    std::string bytes = slurp(golden("pretraining/public_128_s12345_d2.tfrecord"));
    size_t offset = 0;
    for (int k = 0; k < 10; ++k) {
        uint64_t len = 0;
        std::memcpy(&len, bytes.data() + offset, 8);
        offset += 8 + 4 + len + 4;
    }
    bytes[offset + 8 + 4 + 20] ^= 0x55;
    std::ofstream(w.p("bad.tfrecord"), std::ios::binary) << bytes;
    const std::string cmd = pretrain(w, w.p("run"), w.p("bad.tfrecord"));
    for (int attempt = 0; attempt < 2; ++attempt) {
        const auto r = run_bertbench(cmd);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(error_line(r.out).find("--skip_corrupt_records"), std::string::npos) << r.out;
        const json res = json::parse(slurp(w.p("run/results.json")));
        EXPECT_EQ(res["status"], "aborted");
        EXPECT_NE(res["reason"].get<std::string>().find("bad.tfrecord"), std::string::npos);
        const std::string ml = slurp(w.p("run/mlperf.log"));
        EXPECT_EQ(count_of(ml, "\"key\": \"init_start\""), 1u) << ml;
        EXPECT_EQ(count_of(ml, "\"key\": \"run_start\""), 1u) << ml;
        EXPECT_EQ(count_of(ml, "\"key\": \"run_stop\""), 1u) << ml;
        EXPECT_NE(ml.find("\"status\": \"aborted\""), std::string::npos) << ml;
        EXPECT_EQ(count_of(ml, "\"key\": \"block_start\""),
                  count_of(ml, "\"key\": \"block_stop\""));
    }
    EXPECT_TRUE(fs::exists(w.p("run/mlperf.log.failed-start-1")));
    // The hint's flag exists and works.
    const auto s = run_bertbench(cmd + " --skip_corrupt_records --output_dir=" + w.p("skip"));
    EXPECT_EQ(s.exit_code, 0) << s.out;
}

TEST(DataSafetyCli, BadInputsFailBeforeTheFirstStep) {
    const Workdir w("before");
    const std::string data = golden("pretraining/public_128_s12345_d2.tfrecord");
    const model::ParamTable table(model::BertConfig::from_json_file(w.p("bert_config.json")),
                                  model::Heads::pretraining);
    std::vector<float> params(table.total_floats());
    table.initialize(params, 1);
    const model::ParamInfo& q = table.at("bert/encoder/layer_1/attention/self/query/kernel");
    params[q.offset + 77] = std::nanf("");
    model::save_checkpoint(w.p("nan.safetensors"), table, params);
    const auto r = run_bertbench(pretrain(w, w.p("run"), data) + " --init_checkpoint=" +
                                 w.p("nan.safetensors"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(error_line(r.out).find("tensor bert/encoder/layer_1/attention/self/query/kernel: "
                                     "value nan at flat index 77"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("run/mlperf.log")));
    const auto e = run_bertbench("eval --init_checkpoint=" + w.p("nan.safetensors") +
                                 " --input_file=" + data);
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_NE(error_line(e.out).find("flat index 77"), std::string::npos) << e.out;
    // SQuAD prediction too (it wrote NaN raw results, then failed in decoding), in every dtype
    const model::ParamTable squad_table(table.config(), model::Heads::squad);
    std::vector<float> squad_params(squad_table.total_floats());
    squad_table.initialize(squad_params, 1);
    squad_params[squad_table.at("bert/encoder/layer_1/attention/self/query/kernel").offset + 77] = std::nanf("");
    model::save_checkpoint(w.p("nan_squad.safetensors"), squad_table, squad_params);
    for (const char* dtype : {"fp32", "int8"}) {
        const auto p = run_bertbench("squad --do_predict --vocab_file=" + golden("vocab.txt") + " --predict_file=" +
                                     golden("squad_pipeline/dataset-v1.1.json") + " --init_checkpoint=" +
                                     w.p("nan_squad.safetensors") + " --max_seq_length=128 --max_query_length=32" +
                                     " --doc_stride=64 --dtype=" + dtype + " --output_dir=" + w.p("pred"));
        EXPECT_EQ(p.exit_code, 1) << p.out;
        EXPECT_NE(error_line(p.out).find("tensor bert/encoder/layer_1/attention/self/query/kernel: value nan at flat "
                                         "index 77"), std::string::npos) << p.out;
        EXPECT_FALSE(fs::exists(w.p("pred/predictions.json"))) << dtype;
    }

    // An eval set of another sequence length, although the first evaluation is far away.
    const auto v = run_bertbench(pretrain(w, w.p("run2"), data) + " --do_eval --eval_input_file=" +
                                 golden("eval_pick/public_512_eval100.tfrecord") +
                                 " --eval_every_samples=1000000");
    EXPECT_EQ(v.exit_code, 1) << v.out;
    const std::string ve = error_line(v.out);
    EXPECT_NE(ve.find("--eval_input_file"), std::string::npos) << ve;
    EXPECT_NE(ve.find("public_512_eval100.tfrecord"), std::string::npos) << ve;
    EXPECT_FALSE(fs::exists(w.p("run2/mlperf.log")));

    // A truncated shard (a copy cut short), although the run would end before reading the cut.
    const std::string whole = slurp(data);
    std::ofstream(w.p("cut.tfrecord"), std::ios::binary) << whole.substr(0, whole.size() * 2 / 3);
    const auto t = run_bertbench(pretrain(w, w.p("run5"), w.p("cut.tfrecord")));
    EXPECT_EQ(t.exit_code, 1) << t.out;
    const std::string te = error_line(t.out);
    EXPECT_NE(te.find("cut.tfrecord: record "), std::string::npos) << te;
    EXPECT_NE(te.find("truncated"), std::string::npos) << te;
    EXPECT_NE(te.find("before the first step"), std::string::npos) << te;
    EXPECT_FALSE(fs::exists(w.p("run5/mlperf.log")));

    // Records of a larger vocabulary than the model's (BERT's 30522 ids, a 1000-token model).
    std::ofstream(w.p("small_vocab.json"))
        << R"({"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 512})";
    std::string cmd = pretrain(w, w.p("run6"), data);
    cmd.replace(cmd.find(w.p("bert_config.json")), w.p("bert_config.json").size(), w.p("small_vocab.json"));
    const auto u = run_bertbench(cmd);
    EXPECT_EQ(u.exit_code, 1) << u.out;
    EXPECT_NE(error_line(u.out).find("outside the model's vocabulary [0, 1000)"), std::string::npos) << u.out;
    EXPECT_FALSE(fs::exists(w.p("run6/mlperf.log")));

    // A stray file named like a checkpoint with a step beyond 64 bits.
    fs::create_directories(w.p("run3"));
    const std::string stray = w.p("run3/model.ckpt-99999999999999999999.safetensors");
    std::ofstream(stray) << "x";
    const auto c = run_bertbench(pretrain(w, w.p("run3"), data));
    EXPECT_EQ(c.exit_code, 1) << c.out;
    EXPECT_NE(error_line(c.out).find(stray), std::string::npos) << c.out;

    // A damaged train_log.jsonl of a resumed run names the file and line.
    ASSERT_EQ(run_bertbench(pretrain(w, w.p("run4"), data) + " --stop_steps=2").exit_code, 0);
    std::ofstream(w.p("run4/train_log.jsonl")) << "{\"step\": \"two\"}\n";
    const auto d = run_bertbench(pretrain(w, w.p("run4"), data));
    EXPECT_EQ(d.exit_code, 1) << d.out;
    EXPECT_NE(error_line(d.out).find("train_log.jsonl: line 1"), std::string::npos) << d.out;
    // A line that is not JSON with lines after it is damage, said (it once cut the log there);
    // as the last line it is a write torn by a kill, dropped.
    std::ofstream(w.p("run4/train_log.jsonl")) << "{\"step\": 1}\n{\"step\": 2, garbage\n{\"step\": 3}\n";
    const auto damaged = run_bertbench(pretrain(w, w.p("run4"), data));
    EXPECT_EQ(damaged.exit_code, 1) << damaged.out;
    EXPECT_NE(error_line(damaged.out).find("train_log.jsonl: line 2: expected a JSON object with \"step\", got text "
                                           "that is not JSON (the log is damaged"),
              std::string::npos) << damaged.out;
    std::ofstream(w.p("run4/train_log.jsonl")) << "{\"step\": 1}\n{\"step\": 2, \"lo";
    const auto torn = run_bertbench(pretrain(w, w.p("run4"), data));
    ASSERT_EQ(torn.exit_code, 0) << torn.out;
    std::vector<int> steps;
    for (const json& j : testing::read_jsonl(w.p("run4/train_log.jsonl"))) steps.push_back(j["step"].get<int>());
    EXPECT_EQ(steps, (std::vector<int>{1, 3, 4})) << slurp(w.p("run4/train_log.jsonl"));
}

}  // namespace
}  // namespace bertbench
