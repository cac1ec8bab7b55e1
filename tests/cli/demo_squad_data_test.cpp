// scripts/make-demo-squad.py (the data of `make demo-squad`) on a small synthetic Brown-format
// directory (CI is offline): the output is deterministic, valid SQuAD v1.1 whose every answer is the
// span at answer_start of its context (code points, on word boundaries), each question has its
// style's form ("where is <answer> ?" / "what word follows <anchor> ?" with an anchor that occurs
// once in the context), train and dev come from disjoint documents, and both the project's reader
// and `bertbench squad --features_only` accept every answer.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "data/squad.hpp"
#include "run_util.hpp"
#include "test_util.hpp"

namespace bertbench::testing {
namespace {

namespace fs = std::filesystem;

std::string demo_squad_script() {
    const char* d = std::getenv("BB_SOURCE_DIR");
    const std::string root =
        d ? d : fs::path(__FILE__).parent_path().parent_path().parent_path().string();
    return root + "/scripts/make-demo-squad.py";
}

int sh(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::vector<std::string> words_of(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> w;
    for (std::string x; in >> x;) w.push_back(x);
    return w;
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// A Brown-like document: `n` sentences of tokenised text, one per line, with punctuation tokens,
// capitalised words, a multi-byte word (code-point offsets) and the document's own marker word.
std::string document(const std::string& marker, int doc, int n) {
    static const char* kWords[] = {"the", "jury", "said", "county", "election", "was", "conducted",
                                   "Fulton", "city", "of", "Atlanta", "café", "report", "a",
                                   "investigation", "produced", "no", "evidence", "that", "irregularities",
                                   "took", "place", "grand", "term", "end", "presentments", "over-all"};
    const int nw = static_cast<int>(sizeof(kWords) / sizeof(kWords[0]));
    std::string out;
    unsigned state = 2654435761u * static_cast<unsigned>(doc + 1);
    for (int s = 0; s < n; ++s) {
        const int len = 8 + s % 9;
        for (int i = 0; i < len; ++i) {
            state = state * 1103515245u + 12345u;
            out += (i == 3 ? fmt::format("{}{}", marker, (state >> 8) % 97) : kWords[(state >> 16) % nw]);
            out += (i + 1 == len ? " .\n" : (i % 5 == 4 ? " , " : " "));
        }
    }
    return out;
}

struct Fixture {
    TmpDir tmp{"bb_demo_squad"};
    Fixture() {
        fs::create_directories(tmp.path / "brown");
        for (int shard = 0; shard < 2; ++shard) {
            std::string text;
            for (int d = 0; d < 6; ++d) {
                if (d > 0) text += '\n';
                text += document("trainw", shard * 6 + d, 20 + d);
            }
            write_file_atomic(tmp.file(fmt::format("brown/train-0000{}-of-00002.txt", shard)), text);
        }
        std::string dev;
        for (int d = 0; d < 3; ++d) {
            if (d > 0) dev += '\n';
            dev += document("devw", 100 + d, 18 + d);
        }
        write_file_atomic(tmp.file("brown/eval.txt"), dev);
    }
    int generate(const std::string& out, const std::string& extra = "") const {
        return sh("/usr/bin/python3 '" + demo_squad_script() + "' '" + tmp.file("brown") + "' '" +
                  out + "' --train_questions=60 --dev_questions=20 " + extra + " >/dev/null");
    }
};

// Checks one generated file of --style `style`; counts its questions into *questions.
void check_set(const std::string& path, const std::string& style, const std::string& own_marker,
               const std::string& other_marker, std::set<std::string>* ids, size_t* questions) {
    const nlohmann::json doc = nlohmann::json::parse(read_file(path));
    EXPECT_EQ(doc.at("version"), "1.1");
    *questions = 0;
    for (const auto& article : doc.at("data")) {
        EXPECT_TRUE(article.at("title").is_string());
        for (const auto& p : article.at("paragraphs")) {
            const std::string context = p.at("context");
            EXPECT_EQ(context.find(other_marker), std::string::npos) << "documents shared: " << context;
            EXPECT_NE(context.find(own_marker), std::string::npos);
            const std::u32string ctx32 = data::utf8_to_u32(context);
            const auto cw = words_of(context);
            for (const auto& qa : p.at("qas")) {
                ++*questions;
                const std::string id = qa.at("id");
                EXPECT_TRUE(ids->insert(id).second) << "duplicate id " << id;
                ASSERT_EQ(qa.at("answers").size(), 1u) << id;
                const std::string text = qa.at("answers")[0].at("text");
                const int64_t start = qa.at("answers")[0].at("answer_start");
                const std::u32string t32 = data::utf8_to_u32(text);
                ASSERT_GE(start, 0) << id;
                ASSERT_LE(static_cast<size_t>(start) + t32.size(), ctx32.size()) << id;
                // The answer is the context's span at answer_start (code points), on word boundaries.
                EXPECT_EQ(ctx32.substr(static_cast<size_t>(start), t32.size()), t32) << id;
                EXPECT_TRUE(start == 0 || ctx32[static_cast<size_t>(start) - 1] == U' ') << id;
                const size_t after = static_cast<size_t>(start) + t32.size();
                EXPECT_TRUE(after == ctx32.size() || ctx32[after] == U' ') << id;
                // The word before the answer (the anchor) has a letter and occurs once in the context.
                const auto aw = words_of(text);
                EXPECT_TRUE(aw.size() >= 1 && aw.size() <= 3) << id;
                const size_t wi = words_of(data::u32_to_utf8(ctx32.substr(0, static_cast<size_t>(start)))).size();
                ASSERT_GE(wi, 1u) << id;
                const std::string anchor = cw[wi - 1];
                EXPECT_EQ(std::count_if(cw.begin(), cw.end(), [&](const std::string& w) { return lower(w) == lower(anchor); }), 1)
                    << id << ": anchor " << anchor;
                static const char* kCount[] = {"", "word follows", "two words follow", "three words follow"};
                const std::string want = style == "follows"
                                             ? fmt::format("what {} {} ?", kCount[aw.size()], anchor)
                                             : "where is " + text + " ?";
                EXPECT_EQ(qa.at("question").get<std::string>(), want) << id;
            }
        }
    }
}

TEST(DemoSquadData, DeterministicValidSpansDisjointDocuments) {
    Fixture f;
    ASSERT_EQ(f.generate(f.tmp.file("a")), 0);
    ASSERT_EQ(f.generate(f.tmp.file("b")), 0);
    ASSERT_EQ(f.generate(f.tmp.file("c"), "--seed=7"), 0);
    for (const char* name : {"train-v1.1.json", "dev-v1.1.json"}) {
        const std::string a = read_file(f.tmp.file(std::string("a/") + name));
        EXPECT_EQ(a, read_file(f.tmp.file(std::string("b/") + name))) << name << ": not deterministic";
        EXPECT_NE(a, read_file(f.tmp.file(std::string("c/") + name))) << name << ": --seed has no effect";
    }
    std::set<std::string> ids;
    size_t n_train = 0, n_dev = 0;
    check_set(f.tmp.file("a/train-v1.1.json"), "locate", "trainw", "devw", &ids, &n_train);
    check_set(f.tmp.file("a/dev-v1.1.json"), "locate", "devw", "trainw", &ids, &n_dev);
    EXPECT_EQ(n_train, 60u);
    EXPECT_EQ(n_dev, 20u);
    // --style=follows: the same contexts and answers, "what word follows <anchor> ?" questions.
    ASSERT_EQ(f.generate(f.tmp.file("f"), "--style=follows"), 0);
    std::set<std::string> ids_f;
    check_set(f.tmp.file("f/train-v1.1.json"), "follows", "trainw", "devw", &ids_f, &n_train);
    check_set(f.tmp.file("f/dev-v1.1.json"), "follows", "devw", "trainw", &ids_f, &n_dev);
    EXPECT_EQ(n_train, 60u);
    EXPECT_EQ(n_dev, 20u);

    // The project's reader (run_squad.py's) finds every training answer: no skip warnings.
    for (const char* name : {"train-v1.1.json", "dev-v1.1.json"}) {
        const std::string path = f.tmp.file(std::string("a/") + name);
        std::vector<std::string> warnings;
        const auto examples =
            data::read_squad_examples(data::parse_squad_json(read_file(path), path), path, {true, false}, &warnings);
        EXPECT_TRUE(warnings.empty()) << name << ": " << (warnings.empty() ? "" : warnings[0]);
        EXPECT_EQ(examples.size(), std::string(name) == "dev-v1.1.json" ? 20u : 60u);
    }
}

TEST(DemoSquadData, BertbenchSquadAcceptsEveryAnswer) {
    Fixture f;
    ASSERT_EQ(f.generate(f.tmp.file("a")), 0);
    const RunResult r = run_bertbench(
        "squad --vocab_file='" + shared_dir() + "/golden/vocab.txt' --do_lower_case --do_train --train_file='" +
        f.tmp.file("a/train-v1.1.json") + "' --do_predict --predict_file='" + f.tmp.file("a/dev-v1.1.json") +
        "' --max_seq_length=80 --doc_stride=32 --max_query_length=24 --output_dir='" + f.tmp.file("feat") +
        "' --features_only");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("Could not find answer"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Num orig examples = 60"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Num orig examples = 20"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(f.tmp.file("feat/train.tf_record")));
    EXPECT_TRUE(fs::exists(f.tmp.file("feat/eval.tf_record")));
}

TEST(DemoSquadData, MissingInputIsOneErrorAndNoOutput) {
    TmpDir tmp{"bb_demo_squad_bad"};
    fs::create_directories(tmp.path / "brown");
    const int rc = sh("/usr/bin/python3 '" + demo_squad_script() + "' '" + tmp.file("brown") +
                      "' '" + tmp.file("out") + "' >/dev/null 2>'" + tmp.file("err") + "'");
    EXPECT_EQ(rc, 1);
    const std::string err = read_file(tmp.file("err"));
    EXPECT_NE(err.find("expected train-*.txt and eval.txt"), std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_FALSE(fs::exists(tmp.file("out/train-v1.1.json")));
}

}  // namespace
}  // namespace bertbench::testing
