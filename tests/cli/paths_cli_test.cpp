// File names and paths a user's shell can give, on the real binary: a single-file flag's name
// holding a comma is one file (never split, so never overwritten as "not an input"); a list flag
// says why such a name matched nothing; NVIDIA's --input_dir reads its files as listed, glob
// characters and all; /dev/stdout appends to what stdout is redirected to; a result that never
// reached stdout fails the command; a flag value that is not UTF-8, an output name near NAME_MAX,
// a dangling --output_dir link, convert's TF prefix that is a directory or a device; a finished
// run started again writes nothing; --json-summary's directory is checked before the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_fixtures.hpp"
#include "core/fs.hpp"
#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {

namespace fs = std::filesystem;

struct PathsTmp {
    TmpDir tmp{"bb_paths"};
    std::string dir = tmp.path.string();
    std::string config = dir + "/c,fg.json";
    PathsTmp() { write_tiny_bert_config(config); }
};

std::string records() { return golden("pretraining/public_128_s12345_d2.tfrecord"); }

std::string tiny_pretrain(const std::string& config, const std::string& out) {
    return "pretrain --input_file=" + records() + " --bert_config_file='" + config + "' --output_dir='" + out +
           "' --threads=1 --train_batch_size=4 --num_train_steps=2 --num_warmup_steps=0 "
           "--save_checkpoints_steps=0";
}

TEST(PathsCli, ASingleFileFlagsCommaIsPartOfTheName) {
    const PathsTmp t;
    const std::string before = slurp(t.config);
    // bench's outputs against its inputs: the config named whole, not as "c" and "fg.json"
    const auto r = run_bertbench("bench --mode=infer --bert_config_file='" + t.config + "' --json='" + t.config +
                                 "' --threads=1 --steps=1 --warmup=0 --batch_size=1 --seq_len=16");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("is the same file as the input --bert_config_file"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(t.config), before);
    // and it trains, and resumes from another directory, as that one file (the resume compares
    // the inputs' absolute paths: a comma split gave "<cwd>/c" and "<cwd>/fg.json")
    const auto p = run_shell("cd " + t.dir + " && " + bertbench_path() + " " + tiny_pretrain("c,fg.json", "run"));
    ASSERT_EQ(p.exit_code, 0) << p.out;
    const auto again = run_bertbench(tiny_pretrain(t.config, t.dir + "/run"));
    EXPECT_EQ(again.exit_code, 0) << again.out;
    EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
}

TEST(PathsCli, AListFlagSaysWhyACommaOrWildcardNameMatchedNothing) {
    const PathsTmp t;
    fs::copy_file(records(), t.dir + "/t,1.tfrecord");
    auto r = run_bertbench("pretrain --input_file='" + t.dir + "/t,1.tfrecord' --bert_config_file='" + t.config +
                           "' --output_dir=" + t.dir + "/o --threads=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("is a file, but input_file is a comma list, as the references' is: rename the file"),
              std::string::npos) << r.out;
    fs::copy_file(records(), t.dir + "/t[1].tfrecord");
    r = run_bertbench("pretrain --input_file='" + t.dir + "/t[1].tfrecord' --bert_config_file='" + t.config +
                      "' --output_dir=" + t.dir + "/o --threads=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("(hint: that is a file, but its * ? [ \\ are wildcards here, as in tf.gfile.Glob: \"" +
                         t.dir + "/t\\[1].tfrecord\" names it)"),
              std::string::npos) << r.out;
    // which, given so, trains on it
    r = run_bertbench(tiny_pretrain(t.config, t.dir + "/o") + " --input_file='" + t.dir + "/t\\[1].tfrecord'");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

// NVIDIA's run_pretraining.py lists --input_dir with os.listdir: its files are read as named.
TEST(PathsCli, NvidiasInputDirIsReadAsListedWhateverItsName) {
    const PathsTmp t;
    const std::string data = t.dir + "/nv [1]*?";
    fs::create_directories(data);
    fs::copy_file(golden("hdf5/public_128_s12345_d2.hdf5"), data + "/wiki_training_[0].hdf5");
    const std::string line = "pretrain --input_dir='" + data + "' --config_file='" + t.config +
                             "' --train_batch_size=4 --max_steps=1 --do_train --json-summary= --threads=1 "
                             "--output_dir=" + t.dir + "/nv";
    auto r = run_bertbench(line);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    fs::copy_file(golden("hdf5/public_128_s12345_d2.hdf5"), data + "/wiki_training_,1.hdf5");
    r = run_bertbench(line + "2");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--input_dir: " + data + "/wiki_training_,1.hdf5: a name holding a comma, expected none"),
              std::string::npos) << r.out;
}

// What the shell printed before and after stays: the output goes through the open descriptor.
TEST(PathsCli, DevStdoutAppendsToWhatStdoutIsRedirectedTo) {
    const PathsTmp t;
    const std::string log = t.dir + "/log.txt";
    const auto r = run_shell("( echo before; " + bertbench_path() + " prepare --input_file=" +
                             golden("corpus_public.txt") + " --vocab_file=" + golden("vocab.txt") +
                             " --output_file=/dev/stdout --dupe_factor=1 --max_seq_length=32 2>/dev/null; "
                             "echo after ) > " + log);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string text = slurp(log);
    EXPECT_TRUE(text.starts_with("before\n")) << text.substr(0, 40);
    EXPECT_TRUE(text.ends_with("after\n"));
    EXPECT_GT(text.size(), 1000u);
    // /dev/fd/N likewise: appended to what descriptor 3 is open on
    const std::string fd3 = t.dir + "/fd3.txt";
    write_file_atomic(fd3, "kept\n");
    const auto f = run_shell("( " + bertbench_path() + " prepare --input_file=" + golden("corpus_public.txt") +
                             " --vocab_file=" + golden("vocab.txt") + " --output_file=/dev/fd/3 --dupe_factor=1 "
                             "--max_seq_length=32 3>> " + fd3 + " )");
    ASSERT_EQ(f.exit_code, 0) << f.out;
    EXPECT_EQ(slurp(fd3).substr(5), text.substr(7, text.size() - 13));
}

TEST(PathsCli, AResultThatNeverReachedStdoutFailsTheCommand) {
    const auto r = run_shell("( " + bertbench_path() + " version > /dev/full )");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("bertbench version: error: stdout: could not write the output: No space left on device"),
              std::string::npos) << r.out;
}

TEST(PathsCli, AFlagValueThatIsNotUtf8IsOneLineError) {
    const PathsTmp t;
    const auto r = run_bertbench(tiny_pretrain(t.config, t.dir + "/bad\xff" "name"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("flag --output_dir: byte " + std::to_string(t.dir.size() + 4) +
                         " of its value (0xff) is not UTF-8, expected UTF-8 text"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(t.dir + "/bad\xff" "name"));
}

// "<name>.tmp.<pid>" would pass NAME_MAX (255) for a name of 249 bytes: the temporary is cut.
TEST(PathsCli, OutputNamesNearNameMaxAreWritten) {
    const PathsTmp t;
    const std::string name = t.dir + "/" + std::string(240, 'n') + ".tfrecord";
    const auto r = run_bertbench("prepare --input_file=" + golden("corpus_public.txt") + " --vocab_file=" +
                                 golden("vocab.txt") + " --output_file=" + name + " --dupe_factor=1 --max_seq_length=32");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_GT(fs::file_size(name), 1000u);
}

TEST(PathsCli, ADanglingOutputDirLinkIsNamed) {
    const PathsTmp t;
    fs::create_symlink(t.dir + "/nowhere/dir", t.dir + "/dangling");
    const auto r = run_bertbench(tiny_pretrain(t.config, t.dir + "/dangling"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--output_dir=" + t.dir + "/dangling: a symbolic link to " + t.dir +
                         "/nowhere/dir, which leads nowhere"),
              std::string::npos) << r.out;
    // squad's too, and with a trailing '/'
    const auto s = run_bertbench("squad --vocab_file=" + golden("vocab.txt") + " --do_train --train_file=" +
                                 golden("squad_pipeline/train-v1.1.json") + " --features_only --output_dir=" +
                                 t.dir + "/dangling/");
    EXPECT_EQ(s.exit_code, 1) << s.out;
    EXPECT_NE(s.out.find("--output_dir=" + t.dir + "/dangling/: a symbolic link to"), std::string::npos) << s.out;
}

// squad given a pretrain run's --output_dir: the checkpoint is named as that command's, before its
// missing SQuAD head would be reported as a missing tensor; the pretrain run's files keep their bytes.
TEST(PathsCli, AnotherCommandsRunIsNamedAsSuch) {
    const PathsTmp t;
    const std::string run = t.dir + "/run";
    ASSERT_EQ(run_bertbench(tiny_pretrain(t.config, run) + " --stop_steps=1").exit_code, 0);
    const std::string config = slurp(run + "/config.json");
    const auto r = run_bertbench("squad --vocab_file=" + golden("vocab.txt") + " --bert_config_file='" + t.config +
                                 "' --do_train --train_file=" + golden("squad_pipeline/train-v1.1.json") +
                                 " --max_seq_length=96 --max_query_length=32 --threads=1 --output_dir='" + run + "'");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: " + run + "/model.ckpt-1.safetensors: the checkpoint of a bertbench pretrain run, "
                         "expected one of bertbench squad to resume in --output_dir=" + run),
              std::string::npos) << r.out;
    EXPECT_EQ(slurp(run + "/config.json"), config);
}

// "Nothing to do" writes nothing: the run's files keep their bytes.
TEST(PathsCli, AFinishedRunStartedAgainWritesNothing) {
    const PathsTmp t;
    const std::string run = t.dir + "/run";
    ASSERT_EQ(run_bertbench(tiny_pretrain(t.config, run)).exit_code, 0);
    const std::string config = slurp(run + "/config.json"), log = slurp(run + "/train_log.jsonl");
    const auto r = run_bertbench(tiny_pretrain(t.config, run));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("nothing to do"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(run + "/config.json"), config);
    EXPECT_EQ(slurp(run + "/train_log.jsonl"), log);
}

// --init_checkpoint=DIR, as TF's init_from_checkpoint takes a model directory: the latest checkpoint
// its `checkpoint` state file names; a directory without one is refused naming what it holds.
TEST(PathsCli, ADirectoryAsInitCheckpointIsItsCheckpoint) {
    const PathsTmp t;
    const std::string run = t.dir + "/run", eval = " --input_file=" + golden("eval_pick/public_128_eval100.tfrecord") +
                                                  " --max_eval_steps=1 --threads=1 --bert_config_file='" + t.config + "'";
    ASSERT_EQ(run_bertbench(tiny_pretrain(t.config, run)).exit_code, 0);
    ASSERT_EQ(run_bertbench("convert --input=" + run + "/model.ckpt-2 --output=" + t.dir + "/tf/model.ckpt-2").exit_code, 0);
    const auto want = run_bertbench("eval --init_checkpoint=" + run + "/model.ckpt-2" + eval + " --json=" + t.dir + "/w.json");
    ASSERT_EQ(want.exit_code, 0) << want.out;
    const std::string dir = t.dir + "/tf";  // convert wrote TF's state file there
    auto r = run_bertbench("eval --init_checkpoint=" + dir + eval + " --json=" + t.dir + "/d.json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--init_checkpoint=" + dir + ": a directory; reading its checkpoint " + dir + "/model.ckpt-2"),
              std::string::npos) << r.out;
    nlohmann::json a = nlohmann::json::parse(slurp(t.dir + "/w.json")), b = nlohmann::json::parse(slurp(t.dir + "/d.json"));
    a.erase("checkpoint");
    b.erase("checkpoint");
    EXPECT_EQ(a, b);
    r = run_bertbench("eval --init_checkpoint=" + run + eval);  // a run's directory: which one is the user's call
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(run + ": a directory; expected a checkpoint file or TensorFlow prefix (hint: name one of"),
              std::string::npos) << r.out;
}

// An --eval_batch_size far above the records of the eval file: the engine is sized for the
// records (it was sized for the flag, gigabytes held for nothing), same metrics.
TEST(PathsCli, AnEvalBatchLargerThanTheFileIsSizedForTheFile) {
    const PathsTmp t;
    const std::string run = t.dir + "/run";
    ASSERT_EQ(run_bertbench(tiny_pretrain(t.config, run)).exit_code, 0);
    const std::string eval = "eval --init_checkpoint=" + run + "/model.ckpt-2 --input_file=" +
                             golden("eval_pick/public_128_eval100.tfrecord") + " --threads=1 --bert_config_file='" +
                             t.config + "'";
    ASSERT_EQ(run_bertbench(eval + " --eval_batch_size=100 --json=" + t.dir + "/a.json").exit_code, 0);
    const auto r = run_bertbench(eval + " --eval_batch_size=1000000 --json=" + t.dir + "/b.json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto a = nlohmann::json::parse(slurp(t.dir + "/a.json")), b = nlohmann::json::parse(slurp(t.dir + "/b.json"));
    for (const char* k : {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss",
                          "examples", "predictions"})
        EXPECT_EQ(a.at(k), b.at(k)) << k;
}

TEST(PathsCli, ConvertsTfPrefixIsNeitherADirectoryNorADevice) {
    const PathsTmp t;
    const std::string run = t.dir + "/run";
    ASSERT_EQ(run_bertbench(tiny_pretrain(t.config, run)).exit_code, 0);
    const std::string in = " --input=" + run + "/model.ckpt-2";
    fs::create_directories(t.dir + "/d");
    for (const std::string& out : {t.dir + "/d", t.dir + "/new/", std::string("/dev/null")}) {
        const auto r = run_bertbench("convert" + in + " --output=" + out);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("--output=" + out + ": "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(", expected a TensorFlow checkpoint prefix, the name before .index"), std::string::npos)
            << r.out;
    }
    EXPECT_TRUE(fs::is_empty(t.dir + "/d"));
    EXPECT_FALSE(fs::exists(t.dir + "/new"));
    EXPECT_FALSE(fs::exists("/dev/null.index"));
    // one file into a device: written into it, nothing replaced
    EXPECT_EQ(run_bertbench("convert" + in + " --output=/dev/null --to=safetensors").exit_code, 0);
    // a `checkpoint` file of the user's in the output directory is not TF's state file to rewrite
    std::ofstream(t.dir + "/d/checkpoint") << "my notes\n";
    const auto r = run_bertbench("convert" + in + " --output=" + t.dir + "/d/m");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("d/checkpoint is not a TensorFlow checkpoint state file"), std::string::npos) << r.out;
    EXPECT_EQ(slurp(t.dir + "/d/checkpoint"), "my notes\n");
    EXPECT_FALSE(fs::exists(t.dir + "/d/m.index"));
}

// NVIDIA's dllogger opens its file at start-up: a place it cannot be written stops the run first.
TEST(PathsCli, JsonSummarysDirectoryIsCheckedBeforeTheRun) {
    const PathsTmp t;
    std::ofstream(t.dir + "/file") << "x";
    const auto r = run_bertbench(tiny_pretrain(t.config, t.dir + "/run") + " --json-summary=" + t.dir + "/file/d.json");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--json-summary=" + t.dir + "/file/d.json: " + t.dir + "/file is not a directory"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(t.dir + "/run"));
}

TEST(PathsCli, AFileNamedLikeAFlagGetsItsHint) {
    const auto r = run_bertbench("squad-eval " + golden("squad_pipeline/dataset-v1.1.json") + " -p.json");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("unknown flag -p.json (a file whose name starts with '-': ./-p.json, or -- before it)"),
              std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench::testing
