// Flags: absl-style parsing (reference command lines must paste unchanged) and its errors.
#include "core/flags.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace bertbench {
namespace {

struct Parsed {
    std::string input = "in.txt";
    bool lower = true, eval = false;
    int seq = 128;
    int64_t steps = 10;
    double prob = 0.15;
};

bool run(Parsed& p, std::vector<std::string> args, Flags* out = nullptr) {
    Flags f("test", "testing");
    f.add("input_file", &p.input, "input");
    f.add("do_lower_case", &p.lower, "lower");
    f.add("do_eval", &p.eval, "eval");
    f.add("max_seq_length", &p.seq, "tokens");
    f.add("num_train_steps", &p.steps, "steps");
    f.add("masked_lm_prob", &p.prob, "prob");
    args.insert(args.begin(), "test");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    const bool r = f.parse(static_cast<int>(argv.size()), argv.data());
    if (out) *out = f;
    return r;
}

TEST(Flags, ReferenceSpellings) {
    Parsed p;
    run(p, {"--input_file=a.txt", "--do_lower_case=False", "--do_eval", "--max_seq_length", "512",
            "-num_train_steps=7", "--masked_lm_prob=0.2"});
    EXPECT_EQ(p.input, "a.txt");
    EXPECT_FALSE(p.lower);
    EXPECT_TRUE(p.eval);
    EXPECT_EQ(p.seq, 512);
    EXPECT_EQ(p.steps, 7);
    EXPECT_DOUBLE_EQ(p.prob, 0.2);
    Parsed q;
    run(q, {"--nodo_lower_case", "--do_eval=True"});
    EXPECT_FALSE(q.lower);
    EXPECT_TRUE(q.eval);
}

// Python's int() as absl's IntegerParser and argparse's type=int call it, to a decimal of any size.
TEST(Flags, IntegersAsPythonReadsThem) {
    const std::vector<std::pair<std::string, std::string>> good{
        {"16", "16"},   {"0x10", "16"},    {"0x1F", "31"},
        {"0o17", "15"}, {"1_000", "1000"}, {" 7\n", "7"},
        {"-12", "-12"}, {"+3", "3"},       {"010", "10"},
        {"-0", "0"},    {"0x_ff", "255"},  {"0", "0"},
        {"00", "0"},    {"1_2_3", "123"},  {"0xffffffffffffffffffff", "1208925819614629174706175"}};
    for (const auto& [text, want] : good) {
        std::string got;
        EXPECT_TRUE(python_int_decimal(text, &got)) << text;
        EXPECT_EQ(got, want) << text;
    }
    // absl reads a signed text in base 10; '_' only between digits; no other bases or spaces inside
    for (const std::string bad : {"", " ", "-0x10", "0b101", "1__0", "_1", "1_", "0x", "0o8", "1 2",
                                  "1.0", "0x1g", "--1", "+", "0O17", "0X1f"}) {
        std::string got;
        EXPECT_FALSE(python_int_decimal(bad, &got)) << bad;
    }
    Parsed p;
    run(p, {"--max_seq_length=0x80", "--num_train_steps=1_000_000_000_000"});
    EXPECT_EQ(p.seq, 128);
    EXPECT_EQ(p.steps, 1000000000000);
}

// Python's float() (absl's FloatParser, argparse's type=float) on each text, as CPython 3.11 prints it.
TEST(Flags, FloatsAsPythonReadsThem) {
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<std::pair<std::string, double>> good{
        {"16", 16},         {"1.5", 1.5},    {" 2e-3\n", 0.002}, {"1_000.25", 1000.25}, {"-.5", -0.5},
        {"5.", 5},          {"+1E+2", 100},  {"1e1_0", 1e10},     {"inf", inf},          {"-Infinity", -inf},
        {"1e400", inf},     {"-1e400", -inf}, {"1e-400", 0},      {"0.0_1", 0.01}};
    for (const auto& [text, want] : good) {
        double got = -7;
        EXPECT_TRUE(python_float(text, &got)) << text;
        EXPECT_EQ(got, want) << text;
    }
    for (const std::string text : {"NaN", "+nan"}) {
        double got = 0;
        EXPECT_TRUE(python_float(text, &got) && std::isnan(got)) << text;
    }
    // C's strtod reads the first three; float() does not
    for (const std::string bad : {"0x10", "0x1p3", "nan(1)", "1__0", "_1", "1_", "1._5", "1_e5", "1e_5", ".", "e5",
                                  "1e", "1e5.5", "", "  ", "in f", "1 2", "--1", "1,5", "infinit"}) {
        double got = 0;
        EXPECT_FALSE(python_float(bad, &got)) << bad;
    }
    Parsed p;
    p.prob = 0;
    run(p, {"--masked_lm_prob=1_5e-2"});
    EXPECT_EQ(p.prob, 0.15);
    for (const auto& [arg, message] : std::vector<std::pair<std::string, std::string>>{
             {"--masked_lm_prob=0x10", "flag --masked_lm_prob: expected a number, got \"0x10\""},
             {"--masked_lm_prob=inf", "flag --masked_lm_prob: expected a finite number, got \"inf\""},
             {"--masked_lm_prob=1e999", "flag --masked_lm_prob: expected a finite number, got \"1e999\""},
             {"--max_seq_length=2147483648",
              "flag --max_seq_length: expected an integer in [-2147483648, 2147483647], got \"2147483648\""},
             {"--max_seq_length=9223372036854775808",
              "flag --max_seq_length: expected an integer in [-2147483648, 2147483647]"},
             {"--num_train_steps=9223372036854775808",
              "flag --num_train_steps: expected an integer in [-9223372036854775808, 9223372036854775807]"}}) {
        try {
            run(p, {arg});
            ADD_FAILURE() << arg << ": no error";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        }
    }
}

// A flag given twice: the last counts (absl, argparse), said in one warning naming both values;
// the same value again is no news.
TEST(Flags, ARepeatedFlagTakesTheLastAndSaysSo) {
    Parsed p;
    testing::internal::CaptureStderr();
    run(p, {"--input_file=a.tfrecord", "--max_seq_length=128", "--input_file=b.tfrecord", "--max_seq_length=128"});
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(p.input, "b.tfrecord");
    EXPECT_NE(log.find("warning: flag --input_file given again: --input_file=b.tfrecord replaces "
                       "--input_file=a.tfrecord (the last counts"),
              std::string::npos) << log;
    EXPECT_EQ(log.find("max_seq_length"), std::string::npos) << log;
}

TEST(Flags, TracksExplicitAndJson) {
    Parsed p;
    Flags f("x", "");
    run(p, {"--max_seq_length=64"}, &f);
    EXPECT_TRUE(f.is_set("max_seq_length"));
    EXPECT_FALSE(f.is_set("input_file"));
    EXPECT_EQ(f.to_json()["max_seq_length"], 64);
    EXPECT_EQ(f.to_json()["input_file"], "in.txt");
}

TEST(Flags, Errors) {
    Parsed p;
    try {
        run(p, {"--max_seq_lenght=3"});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("did you mean --max_seq_length"), std::string::npos)
            << e.what();
    }
    try {  // argparse's unique-prefix abbreviation (NVIDIA's PyTorch scripts): named, not taken
        run(p, {"--max_seq=64"});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown flag --max_seq (did you mean --max_seq_length? "
                                             "flags are not abbreviated here"),
                  std::string::npos) << e.what();
    }
    EXPECT_THROW(run(p, {"--max_seq_length=12x"}), Error);
    EXPECT_THROW(run(p, {"--max_seq_length=99999999999"}), Error);
    EXPECT_THROW(run(p, {"--do_eval=maybe"}), Error);
    EXPECT_THROW(run(p, {"--masked_lm_prob=nan"}), Error);
    EXPECT_THROW(run(p, {"--input_file"}), Error);
    EXPECT_THROW(run(p, {"stray"}), Error);
    EXPECT_THROW(run(p, {"--nomax_seq_length"}), Error);
    try {  // once said "unknown flag --nodo_eval (did you mean --nodo_eval?)"
        run(p, {"--nodo_eval=true"});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--nodo_eval=true: the no- form of a boolean flag takes no value "
                                             "(expected --nodo_eval, or --do_eval=true|false)"),
                  std::string::npos) << e.what();
    }
}

// A URL where a path goes (the references' gs:// buckets, TF's gfile) is refused in one line
// naming the flag and the scheme, not taken as a local "gs:" directory; other colons are values.
TEST(Flags, UrlsAreRefused) {
    for (const std::string url : {"gs://bucket/squad_large/", "s3://b/x.tfrecord,s3://b/y.tfrecord", "hdfs://n/x"}) {
        Parsed p;
        try {
            run(p, {"--input_file=" + url});
            FAIL() << "no error for " << url;
        } catch (const Error& e) {
            const std::string scheme = url.substr(0, url.find(':'));
            EXPECT_NE(std::string(e.what()).find("flag --input_file: expected a local path or value, got the URL \"" +
                                                 url + "\" (bertbench reads and writes local files only; TensorFlow's "
                                                 "gfile would open " + scheme + "://"),
                      std::string::npos) << e.what();
        }
    }
    for (const std::string value : {"C:/data", "run:1", "a/b://c", "://x", "x y://z"}) {
        Parsed p;
        run(p, {"--input_file=" + value});
        EXPECT_EQ(p.input, value);
    }
}

// Unsigned 64-bit flags (mlperf.conf's LoadGen seeds reach 2^64 - 1): every value, no sign, no
// overflow.
TEST(Flags, Unsigned64) {
    const auto parse = [](const std::string& text) {
        uint64_t v = 0;
        Flags f("test", "testing");
        f.add("seed", &v, "a seed");
        std::string arg = "--seed=" + text;
        char name[] = "test";
        char* argv[] = {name, arg.data()};
        f.parse(2, argv);
        return v;
    };
    EXPECT_EQ(parse("0"), 0u);
    EXPECT_EQ(parse("16159082839903944936"), 16159082839903944936ull);
    EXPECT_EQ(parse("18446744073709551615"), UINT64_MAX);
    for (const char* bad : {"-1", "+1", "18446744073709551616", "1e3", "", " 1", "0x10"})
        EXPECT_THROW(parse(bad), Error) << bad;
}

TEST(Flags, HelpStopsParsing) {
    Parsed p;
    testing::internal::CaptureStdout();
    EXPECT_FALSE(run(p, {"--help"}));
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find("--nodo_lower_case"), std::string::npos);
    EXPECT_NE(out.find("default: 128"), std::string::npos);
}

// Other scripts' spellings: an alias sets the canonical flag (its --no form too), ignored flags
// are accepted in every absl form and listed once, hints replace the edit-distance guess, and
// every bad flag of one command line is in one error.
std::string parse_error(Flags& f, std::vector<std::string> args) {
    args.insert(args.begin(), "test");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    try {
        f.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

struct Compat {
    Parsed p;
    Flags f{"test", "testing"};
    Compat() {
        f.add("input_file", &p.input, "input");
        f.add("do_eval", &p.eval, "eval");
        f.add("max_seq_length", &p.seq, "tokens");
        f.alias("input_files", "input_file");
        f.alias("evaluate", "do_eval");
        f.add_ignored("use_tpu", false, "on a CPU run");
        f.add_ignored("tpu_name", true, "on a CPU run");
        f.add_hint("max_seq_len", "did you mean --max_seq_length?");
    }
};

TEST(Flags, AliasesIgnoredAndHints) {
    {
        Compat c;
        testing::internal::CaptureStderr();
        EXPECT_EQ(parse_error(c.f, {"--input_files=x*.tfrecord", "--noevaluate", "--use_tpu",
                                    "--nouse_tpu", "--tpu_name", "v3-8", "--use_tpu=False"}),
                  "");
        const std::string log = testing::internal::GetCapturedStderr();
        EXPECT_EQ(c.p.input, "x*.tfrecord");
        EXPECT_TRUE(c.f.is_set("input_file"));
        EXPECT_EQ(c.f.spelling("input_file"), "input_files");
        EXPECT_TRUE(c.f.is_set("do_eval"));
        EXPECT_FALSE(c.p.eval);
        EXPECT_EQ(c.f.ignored_text(), "--use_tpu, --nouse_tpu, --tpu_name=v3-8, --use_tpu=False");
        EXPECT_NE(log.find("accepted, no effect on a CPU run: --use_tpu, --nouse_tpu, "
                           "--tpu_name=v3-8, --use_tpu=False"), std::string::npos) << log;
        EXPECT_FALSE(c.f.to_json().contains("use_tpu"));
        EXPECT_FALSE(c.f.to_json().contains("input_files"));
    }
    {
        Compat c;  // the same value under both names is fine; another value is an error
        EXPECT_EQ(parse_error(c.f, {"--input_file=a", "--input_files=a"}), "");
        EXPECT_NE(parse_error(c.f, {"--input_file=a", "--input_files=b"})
                      .find("--input_files=b: names the same setting as --input_file=a"),
                  std::string::npos);
    }
    {
        Compat c;
        const std::string e = parse_error(
            c.f, {"--max_seq_len=3", "--imput_file=a", "--use_tpu=maybe", "--max_seq_length=x",
                  "--tpu_name", "stray"});
        EXPECT_NE(e.find("4 bad flags: (1) unknown flag --max_seq_len (did you mean "
                         "--max_seq_length?); (2) unknown flag --imput_file (did you mean "
                         "--input_file?); (3) flag --use_tpu: expected a boolean"),
                  std::string::npos) << e;
        EXPECT_NE(e.find("(4) flag --max_seq_length: expected an integer"), std::string::npos)
            << e;
    }
    {
        Compat c;  // a value-taking ignored flag at the end of the line needs its value
        EXPECT_EQ(parse_error(c.f, {"--tpu_name"}), "flag --tpu_name needs a value");
    }
}

// Another script's `--name value` (NVIDIA's `--json-summary results/dllogger.json`) when --name is
// unknown: one error, its value not a second ("unexpected argument"); a flag that follows is still
// read. Where positional arguments are taken, the word stays one.
TEST(Flags, UnknownFlagsSpaceSeparatedValueIsNotASecondError) {
    Parsed p;
    try {
        run(p, {"--json-summary", "results/dllogger.json", "--max_seq_length=64"});
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "unknown flag --json-summary");
    }
    EXPECT_EQ(p.seq, 64);
    Flags f("test", "testing");
    f.allow_positional("FILES");
    std::vector<std::string> args{"test", "--frob", "a.json"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    try {
        f.parse(static_cast<int>(argv.size()), argv.data());
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "unknown flag --frob");
    }
    EXPECT_EQ(f.positional(), std::vector<std::string>{"a.json"});
}

TEST(Flags, SplitCommas) {
    EXPECT_EQ(split_commas("a,,b,"), (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(split_commas("").empty());
}

}  // namespace
}  // namespace bertbench
