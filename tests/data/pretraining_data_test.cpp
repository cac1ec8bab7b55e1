// create_pretraining_data against the golden runs of the real reference script
// (/work/shared/golden/pretraining, commands in its README): every output file must be
// byte-identical and the reference's log lines identical. Plus the reading rules that the
// goldens exercise only partly, parallel tokenization, and bad input.
#include "data/pretraining_data.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "data/pretraining_shards.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {
namespace fs = std::filesystem;

std::string golden_dir() {
    const char* d = std::getenv("BB_SHARED_DIR");
    return std::string(d ? d : "/work/shared") + "/golden";
}

struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/bb_pretrain_XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~TempDir() { fs::remove_all(path); }
};

// Runs in the golden directory so that the log names files as the reference's did.
struct InGoldenDir {
    std::string old;
    InGoldenDir() : old(fs::current_path().string()) { fs::current_path(golden_dir()); }
    ~InGoldenDir() { fs::current_path(old); }
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
        s.replace(p, from.size(), to);
    return s;
}

void expect_same_file(const std::string& got_path, const std::string& want_path) {
    const std::string got = read_file(got_path), want = read_file(want_path);
    size_t first = 0;
    while (first < std::min(got.size(), want.size()) && got[first] == want[first]) ++first;
    EXPECT_TRUE(got == want) << got_path << " differs from " << want_path << ": sizes " << got.size()
                             << " vs " << want.size() << ", first differing byte at " << first;
}

struct GoldenRun {
    std::string name, script_log;
    std::vector<std::string> inputs, outputs;  // outputs relative to golden/pretraining
    PretrainingConfig cfg;
};

void run_golden(const GoldenRun& g, int threads = 1) {
    TempDir tmp;
    InGoldenDir in_golden;
    const Vocab vocab = Vocab::load("vocab.txt");
    std::vector<std::string> outs;
    for (const auto& o : g.outputs) outs.push_back(tmp.path + "/" + o);
    std::string log;
    const auto r = create_pretraining_data(g.inputs, outs, vocab, g.cfg, &log, threads);
    EXPECT_GT(r.instances, 0u);
    for (size_t k = 0; k < outs.size(); ++k)
        expect_same_file(outs[k], "pretraining/" + g.outputs[k]);
    log = replace_all(log, "INFO:tensorflow:  " + tmp.path + "/", "INFO:tensorflow:  pretraining/");
    const std::string want = read_file("pretraining/" + g.script_log);
    EXPECT_TRUE(log == want) << g.name << ": log differs (got " << log.size() << " bytes, want "
                             << want.size() << ")";
}

PretrainingConfig config(bool lower, int seq, int preds, int64_t seed, int dupe) {
    PretrainingConfig c;
    c.do_lower_case = lower;
    c.max_seq_length = seq;
    c.max_predictions_per_seq = preds;
    c.random_seed = seed;
    c.dupe_factor = dupe;
    return c;
}

TEST(PretrainingGolden, Public128Seed12345Dupe2) {
    run_golden({"public_128_s12345_d2", "public_128_s12345_d2.log", {"corpus_public.txt"},
                {"public_128_s12345_d2.tfrecord"}, config(true, 128, 20, 12345, 2)});
}

TEST(PretrainingGolden, Public512Seed12345Dupe1) {
    run_golden({"public_512_s12345_d1", "public_512_s12345_d1.log", {"corpus_public.txt"},
                {"public_512_s12345_d1.tfrecord"}, config(true, 512, 76, 12345, 1)});
}

TEST(PretrainingGolden, Public128Cased) {
    run_golden({"public_128_cased_s7_d1", "public_128_cased_s7_d1.log", {"corpus_public.txt"},
                {"public_128_cased_s7_d1.tfrecord"}, config(false, 128, 20, 7, 1)});
}

TEST(PretrainingGolden, Public128MultiFileThreeOutputsTwoThreads) {
    // Also checks that parallel tokenization (threads = 2) changes nothing.
    run_golden({"public_128_multi_s1_d1", "public_128_multi_s1_d1.log",
                {"corpus_public.txt", "corpus_public_extra.txt"},
                {"public_128_multi_s1_d1.tfrecord-00000-of-00003",
                 "public_128_multi_s1_d1.tfrecord-00001-of-00003",
                 "public_128_multi_s1_d1.tfrecord-00002-of-00003"},
                config(true, 128, 20, 1, 1)},
               2);
}

TEST(PretrainingGolden, GoogleScriptSameBytes) {
    // google-research/bert's script: same records as MLPerf's; its log names its own output.
    TempDir tmp;
    InGoldenDir in_golden;
    const Vocab vocab = Vocab::load("vocab.txt");
    std::string log;
    const std::string out = tmp.path + "/google_public_128_s12345_d2.tfrecord";
    create_pretraining_data({"corpus_public.txt"}, {out}, vocab, config(true, 128, 20, 12345, 2), &log);
    expect_same_file(out, "pretraining/public_128_s12345_d2.tfrecord");
    log = replace_all(log, tmp.path + "/", "pretraining/");
    EXPECT_TRUE(log == read_file("pretraining/google_public_128_s12345_d2.log"));
}

// The command line, as the README's command for the multi-file run (flags spelled as there).
// The bertbench binary: $BB_BERTBENCH, else <build>/bertbench next to <build>/tests/<this test>.
std::string bertbench_binary() {
    if (const char* b = std::getenv("BB_BERTBENCH"); b != nullptr && access(b, X_OK) == 0) return b;
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path guess = self.parent_path().parent_path() / "bertbench";
        if (access(guess.c_str(), X_OK) == 0) return guess.string();
    }
    return "";
}

TEST(PretrainingGolden, CommandLineMultiFile) {
    const std::string bin = bertbench_binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    TempDir tmp;
    const std::string p = tmp.path + "/public_128_multi_s1_d1.tfrecord";
    const std::string cmd =
        "cd " + golden_dir() + " && " + bin +
        " prepare --input_file=corpus_public.txt,corpus_public_extra.txt --output_file=" + p +
        "-00000-of-00003," + p + "-00001-of-00003," + p +
        "-00002-of-00003 --vocab_file=vocab.txt --do_lower_case=True --max_seq_length=128 "
        "--max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=1 --dupe_factor=1 "
        "--do_whole_word_mask=False "  // google's flag at its default: the same bytes
        "--log_file=" + tmp.path + "/log.txt 2>" + tmp.path + "/stderr.txt";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(tmp.path + "/stderr.txt");
    for (const char* suffix : {"-00000-of-00003", "-00001-of-00003", "-00002-of-00003"})
        expect_same_file(p + suffix, golden_dir() + "/pretraining/public_128_multi_s1_d1.tfrecord" + suffix);
    const std::string log = replace_all(read_file(tmp.path + "/log.txt"), tmp.path + "/", "pretraining/");
    EXPECT_TRUE(log == read_file(golden_dir() + "/pretraining/public_128_multi_s1_d1.log"));
    // stderr is exactly the reference's stderr
    EXPECT_TRUE(read_file(tmp.path + "/stderr.txt") == read_file(tmp.path + "/log.txt"));
}

// google-research/bert's --do_whole_word_mask=True (MLPerf's copy of the script has no such flag):
// every instance equals what google's own script makes of the corpus (tests/reference/
// make_google_wwm.py ran it unmodified and wrote one hash per instance).
TEST(PretrainingData, WholeWordMaskingEqualsGooglesScript) {
    const std::string bin = bertbench_binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    const char* src = std::getenv("BB_SOURCE_DIR");
    const std::string want = read_file(std::string(src ? src : ".") +
                                       "/tests/reference/google_wwm_public_128_s12345_d1.txt");
    TempDir tmp;
    const std::string out = tmp.path + "/wwm.tfrecord";
    const std::string cmd = "cd " + golden_dir() + " && " + bin + " prepare --input_file=corpus_public.txt" +
                            " --output_file=" + out + " --vocab_file=vocab.txt --do_lower_case=True" +
                            " --max_seq_length=128 --max_predictions_per_seq=20 --masked_lm_prob=0.15" +
                            " --random_seed=12345 --dupe_factor=1 --do_whole_word_mask=True 2>" +
                            tmp.path + "/stderr.txt";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_file(tmp.path + "/stderr.txt");
    const auto join = [](const std::vector<int64_t>& v, size_t n) {
        return fmt::format("{}", fmt::join(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), ","));
    };
    std::string got;
    io::PretrainingRecord r;
    io::TfRecordReader reader(out);
    for (std::string payload; reader.next(payload);) {
        io::parse_pretraining_example(io::decode_example(payload), 128, 20, out, r);
        size_t tokens = 0, predictions = 0;
        while (tokens < r.input_mask.size() && r.input_mask[tokens] == 1) ++tokens;
        while (predictions < r.masked_lm_weights.size() && r.masked_lm_weights[predictions] == 1.0f)
            ++predictions;
        const std::string line = join(r.input_ids, tokens) + ";" + join(r.masked_lm_positions, predictions) +
                                 ";" + join(r.masked_lm_ids, predictions) + ";" +
                                 std::to_string(r.next_sentence_labels);
        uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64, as the script hashes
        for (const unsigned char c : line) h = (h ^ c) * 0x100000001b3ull;
        got += fmt::format("{:016x}\n", h);
    }
    EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), std::count(want.begin(), want.end(), '\n'));
    EXPECT_TRUE(got == want) << "instances differ from google's create_pretraining_data.py";
}

Vocab small_vocab() {
    return Vocab::from_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\nx\ny\nz\nab\n", "small");
}

// Sentences of each document, as token strings joined by ' ' and documents by " | ".
std::string describe(const Corpus& c, const Vocab& v) {
    std::string s;
    for (size_t d = 0; d < c.num_documents(); ++d) {
        if (d) s += " | ";
        for (uint32_t k = c.doc_first[d]; k < c.doc_first[d + 1]; ++k) {
            if (k != c.doc_first[d]) s += " / ";
            const uint64_t b = k == 0 ? 0 : c.sentence_end[k - 1];
            for (uint64_t t = b; t < c.sentence_end[k]; ++t)
                s += (t == b ? "" : " ") + v.token(c.tokens[t]);
        }
    }
    return s;
}

TEST(PretrainingReading, ReferenceLineRules) {
    const Vocab v = small_vocab();
    CorpusBuilder b(v, true);
    // '\r' deleted inside a line ("a\rb" -> "ab"); a line of only U+0085/U+3000/\x1c is blank
    // (ends the document); a line that tokenizes to nothing (U+200B) adds no sentence and does not
    // end the document; invalid UTF-8 is dropped; a final "\r" without '\n' is EOF, so the next
    // file continues the last document.
    b.add_text("\n\na\rb\nx y\n\xc2\x85\xe3\x80\x80\x1c\nz\n\xe2\x80\x8b\nc\xff\n\n\n\nb\n\r");
    b.add_text("y\n");
    const Corpus c = b.finish();
    EXPECT_EQ(describe(c, v), "ab / x y | z / c | b / y");
}

TEST(PretrainingReading, ParallelTokenizationIsIdentical) {
    const std::string text = read_file(golden_dir() + "/corpus_public.txt");
    const Vocab v = Vocab::load(golden_dir() + "/vocab.txt");
    CorpusBuilder one(v, true, 1), two(v, true, 2, 4096);
    one.add_text(text);
    two.add_text(text);
    const Corpus a = one.finish(), b = two.finish();
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.sentence_end, b.sentence_end);
    EXPECT_EQ(a.doc_first, b.doc_first);
}

TEST(PretrainingBadInput, Errors) {
    TempDir tmp;
    const std::string in = tmp.path + "/in.txt";
    write_file_atomic(in, "a b c\nx y z\n\nab c\n");
    const Vocab no_mask = Vocab::from_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\n", "nomask.txt");
    EXPECT_THROW(create_pretraining_data({in}, {tmp.path + "/o"}, no_mask, PretrainingConfig{}, nullptr),
                 Error);
    EXPECT_FALSE(fs::exists(tmp.path + "/o"));
    PretrainingConfig bad;
    bad.max_seq_length = 4;
    EXPECT_THROW(create_pretraining_data({in}, {tmp.path + "/o"}, small_vocab(), bad, nullptr), Error);
    bad = PretrainingConfig{};
    bad.max_predictions_per_seq = -1;
    EXPECT_THROW(bad.validate(), Error);
    for (const double p : {-1.0, 1.5, 1e3}) {
        PretrainingConfig c;
        c.masked_lm_prob = p;
        EXPECT_NE(testing::error_of([&] { c.validate(); }).find("--masked_lm_prob: expected a probability in [0, 1]"),
                  std::string::npos) << p;
        c = PretrainingConfig{};
        c.short_seq_prob = p;
        EXPECT_NE(testing::error_of([&] { c.validate(); }).find("--short_seq_prob: expected a probability in [0, 1]"),
                  std::string::npos) << p;
    }
    // a width that would pad every record to gigabytes: refused before any input is read
    for (const int w : {-1, 65536, 2147483647}) {
        PretrainingConfig c;
        c.max_predictions_per_seq = w;
        EXPECT_NE(testing::error_of([&] { c.validate(); })
                      .find("--max_predictions_per_seq: expected an integer in [0, 65535]"),
                  std::string::npos) << w;
    }
    // 0 writes TFRecords without predictions, but no HDF5 shard: the reader could not read (N, 0)
    // masked_lm_* datasets back (docs/data-pipeline-io.md says so; it used to promise them)
    bad.max_predictions_per_seq = 0;
    EXPECT_EQ(testing::error_of([&] { bad.validate(); }), "");
    bad.output_format = OutputFormat::hdf5;
    const std::string msg = testing::error_of([&] { bad.validate(); });
    EXPECT_NE(msg.find("--max_predictions_per_seq: expected >= 1 with --output_format=hdf5"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("could not be read back"), std::string::npos) << msg;
    EXPECT_THROW(create_pretraining_data({tmp.path + "/missing.txt"}, {tmp.path + "/o"},
                                         small_vocab(), PretrainingConfig{}, nullptr),
                 Error);
}

TEST(PretrainingBadInput, EmptyCorpusWritesEmptyFileLikeReference) {
    TempDir tmp;
    const std::string in = tmp.path + "/in.txt";
    write_file_atomic(in, "\n \n\xe2\x80\x8b\n");
    std::string log;
    const auto r = create_pretraining_data({in}, {tmp.path + "/o"}, small_vocab(),
                                           PretrainingConfig{}, &log);
    EXPECT_EQ(r.instances, 0u);
    EXPECT_TRUE(fs::exists(tmp.path + "/o"));
    EXPECT_EQ(fs::file_size(tmp.path + "/o"), 0u);
    EXPECT_NE(log.find("Wrote 0 total instances"), std::string::npos);
}

TEST(PretrainingBadInput, MorePredictionsThanTokensPads) {
    // max_predictions_per_seq above what a sequence can hold: the reference pads with zeros.
    TempDir tmp;
    const std::string in = tmp.path + "/in.txt";
    write_file_atomic(in, "a b\nc x\n\ny z\nab\n");
    PretrainingConfig c;
    c.max_seq_length = 8;
    c.max_predictions_per_seq = 30;
    c.dupe_factor = 1;
    c.masked_lm_prob = 1.0;
    std::string log;
    const auto r = create_pretraining_data({in}, {tmp.path + "/o"}, small_vocab(), c, &log);
    EXPECT_GT(r.instances, 0u);
    EXPECT_NE(log.find("masked_lm_positions: "), std::string::npos);
}

// Several HDF5 outputs appear all or none (as TFRecords): an error on a later output (here its
// directory is missing) leaves no earlier one under its name, and no temporary (QA4 §4: the
// first was renamed into place before the second failed). A failure while the second is written
// (a full disk) or a signal is the same case (Hdf5ShardWriter::stage, tests/io).
TEST(PretrainingBadInput, Hdf5OutputsAppearAllOrNone) {
    TempDir tmp;
    const std::string in = tmp.path + "/in.txt";
    write_file_atomic(in, "a b c\nx y z\n\nab c a\nb x y\n\nz z a\nb c\n");
    PretrainingConfig c = config(true, 16, 3, 7, 2);
    c.output_format = OutputFormat::hdf5;
    const std::string first = tmp.path + "/o1.hdf5", second = tmp.path + "/no_dir/o2.hdf5";
    const std::string msg = testing::error_of(
        [&] { create_pretraining_data({in}, {first, second}, small_vocab(), c, nullptr); });
    EXPECT_NE(msg.find(second), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(first));
    for (const auto& e : fs::directory_iterator(tmp.path))
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    // and with both writable, both appear
    const auto r = create_pretraining_data({in}, {first, tmp.path + "/o2.H5"}, small_vocab(), c,
                                           nullptr);
    EXPECT_GT(r.instances, 1u);
    EXPECT_TRUE(fs::exists(first) && fs::exists(tmp.path + "/o2.H5"));
}

// Shard mode: an input whose shard's sidecar "<stem>.tfrecord.meta.json" would exceed NAME_MAX
// (255) is refused while planning, naming the file and the limit, not as a filesystem error
// from the worker that failed every shard (QA4 §5). A stem of 236 bytes still fits.
TEST(PretrainingShards, StemTooLongForTheSidecarIsRefusedBeforeAnyWork) {
    TempDir tmp;
    fs::create_directories(tmp.path + "/in");
    write_file_atomic(tmp.path + "/in/short.txt", "a b\n");
    write_file_atomic(tmp.path + "/in/" + std::string(236, 'a') + ".txt", "a b\n");
    EXPECT_EQ(plan_shards(tmp.path + "/in", tmp.path + "/out").size(), 2u);
    const std::string long_name = tmp.path + "/in/" + std::string(237, 'b') + ".txt";
    write_file_atomic(long_name, "a b\n");
    const std::string msg =
        testing::error_of([&] { plan_shards(tmp.path + "/in", tmp.path + "/fresh"); });
    EXPECT_FALSE(fs::exists(tmp.path + "/fresh"));  // refused before the output dir is made
    EXPECT_NE(msg.find("--input_dir: " + long_name + ": "), std::string::npos) << msg;
    EXPECT_NE(msg.find("would be 256 bytes, expected at most 255 (NAME_MAX"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("a stem of at most 236 bytes"), std::string::npos) << msg;
    // with --output_format=hdf5 the sidecar is 4 bytes shorter: stems up to 240 bytes fit
    EXPECT_EQ(plan_shards(tmp.path + "/in", tmp.path + "/out", ".hdf5").size(), 3u);
}

// Two inputs of one stem (a.txt, a.md) would write one shard: refused naming both, before
// --output_dir is made.
TEST(PretrainingShards, TwoInputsOfOneStemAreRefusedNamingBoth) {
    TempDir tmp;
    fs::create_directories(tmp.path + "/in");
    write_file_atomic(tmp.path + "/in/a.md", "a b\n");
    write_file_atomic(tmp.path + "/in/a.txt", "a b\n");
    const std::string msg = testing::error_of([&] { plan_shards(tmp.path + "/in", tmp.path + "/out"); });
    EXPECT_NE(msg.find("--input_dir: " + tmp.path + "/in/a.md and " + tmp.path + "/in/a.txt map to the same output " +
                       tmp.path + "/out/a.tfrecord"),
              std::string::npos)
        << msg;
    EXPECT_FALSE(fs::exists(tmp.path + "/out"));
}

TEST(PretrainingShards, EachShardEqualsASeparateRunAndRerunSkips) {
    TempDir tmp;
    const std::string text = read_file(golden_dir() + "/corpus_public.txt");
    fs::create_directories(tmp.path + "/in");
    // three shards: two thirds of the corpus split at a line, and the extra file
    const size_t cut = text.find('\n', text.size() / 3) + 1;
    write_file_atomic(tmp.path + "/in/part-0.txt", text.substr(0, cut));
    write_file_atomic(tmp.path + "/in/part-1.txt", text.substr(cut));
    write_file_atomic(tmp.path + "/in/part-2.txt", read_file(golden_dir() + "/corpus_public_extra.txt"));
    const Vocab v = Vocab::load(golden_dir() + "/vocab.txt");
    const PretrainingConfig cfg = config(true, 128, 20, 99, 1);
    const auto plan = plan_shards(tmp.path + "/in", tmp.path + "/out");
    ASSERT_EQ(plan.size(), 3u);
    EXPECT_EQ(plan[1].output, tmp.path + "/out/part-1.tfrecord");
    auto s = run_shards(plan, v, cfg, 2, false);
    EXPECT_EQ(s.skipped, 0u);
    const uint64_t made = s.instances;
    EXPECT_GT(made, 0u);
    for (const auto& job : plan) {
        const std::string single = tmp.path + "/single.tfrecord";
        create_pretraining_data({job.input}, {single}, v, cfg, nullptr);
        expect_same_file(job.output, single);
    }
    s = run_shards(plan, v, cfg, 2, false);
    EXPECT_EQ(s.skipped, 3u);
    EXPECT_EQ(s.instances, made);  // the shards kept count as the records they hold
    // A damaged output is not trusted: it is rewritten.
    write_file_atomic(plan[0].output, "garbage");
    s = run_shards(plan, v, cfg, 2, false);
    EXPECT_EQ(s.skipped, 2u);
    const std::string single = tmp.path + "/single.tfrecord";
    create_pretraining_data({plan[0].input}, {single}, v, cfg, nullptr);
    expect_same_file(plan[0].output, single);
    // Different flags: nothing is skipped.
    s = run_shards(plan, v, config(true, 128, 20, 100, 1), 1, false);
    EXPECT_EQ(s.skipped, 0u);
}

}  // namespace
}  // namespace bertbench::data
