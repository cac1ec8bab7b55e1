// `bertbench tokenize` end to end: lines split on '\n' only (U+2028/U+0085 stay inside a line),
// invalid UTF-8 dropped, one JSON object per line equal to FullTokenizer's tokens and ids.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "data/tokenizer.hpp"

namespace bertbench::data {
namespace {
namespace fs = std::filesystem;

std::string binary() {
    if (const char* b = std::getenv("BB_BERTBENCH"); b != nullptr && access(b, X_OK) == 0) return b;
    std::error_code ec;
    const fs::path guess = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "bertbench";
    return !ec && access(guess.c_str(), X_OK) == 0 ? guess.string() : "";
}

TEST(TokenizeCli, JsonLinesMatchLibrary) {
    const std::string bin = binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    const char* shared = std::getenv("BB_SHARED_DIR");
    const std::string vocab_path = std::string(shared ? shared : "/work/shared") + "/golden/vocab.txt";
    const std::vector<std::string> lines = {
        "Hello, World!", "", "caf\xc3\xa9 \xce\x9f\xce\x94\xce\x9f\xce\xa3 na\xc3\xafve",
        "a\xe2\x80\xa8" "b\xc2\x85" "c",  // U+2028 / U+0085 inside one line
        "bad \xff\xfe bytes \xed\xa0\x80 here", "\xe4\xb8\xad\xe6\x96\x87 \"quoted\\\" \t tab",
        "unaffable [CLS] x\r"};
    std::string input;
    for (const auto& l : lines) input += l + "\n";
    input += "no final newline";
    char tmpl[] = "/tmp/bb_tokcli_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    write_file_atomic(dir + "/in.txt", input);
    for (bool lower : {true, false}) {
        const std::string cmd = bin + " tokenize --vocab_file=" + vocab_path +
                                // tokenization.py's own flag at its default: no change
                                (lower ? " --do_lower_case" : " --nodo_lower_case --preserve_unused_tokens=False") +
                                " < " + dir +
                                "/in.txt > " + dir + "/out.jsonl";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        std::istringstream out(read_file(dir + "/out.jsonl"));
        const Vocab vocab = Vocab::load(vocab_path);
        FullTokenizer tok(vocab, lower);
        std::vector<std::string> all = lines;
        all.push_back("no final newline");
        std::string got_line;
        for (const auto& l : all) {
            ASSERT_TRUE(std::getline(out, got_line)) << "too few output lines";
            const auto got = nlohmann::json::parse(got_line);  // also checks it is valid JSON
            std::vector<std::string> tokens;
            std::vector<int32_t> ids;
            tok.tokenize(l, nullptr, &tokens, &ids);
            EXPECT_EQ(got["tokens"].get<std::vector<std::string>>(), tokens) << l;
            EXPECT_EQ(got["ids"].get<std::vector<int32_t>>(), ids) << l;
        }
        EXPECT_FALSE(std::getline(out, got_line)) << "extra output line: " << got_line;
    }
    // Spot check against the reference's output for the first line.
    std::istringstream out(read_file(dir + "/out.jsonl"));
    std::string first;
    std::getline(out, first);
    EXPECT_EQ(first, R"({"tokens": ["[UNK]", ",", "[UNK]", "!"], "ids": [100, 1010, 100, 999]})");
    // Its other value is refused, in one line naming it.
    const std::string refused = bin + " tokenize --vocab_file=" + vocab_path + " --preserve_unused_tokens < " +
                                dir + "/in.txt > " + dir + "/no.jsonl 2> " + dir + "/err.txt";
    EXPECT_NE(std::system(refused.c_str()), 0);
    EXPECT_NE(read_file(dir + "/err.txt").find("error: --preserve_unused_tokens=True: expected False"),
              std::string::npos) << read_file(dir + "/err.txt");
    fs::remove_all(dir);
}

// A vocabulary without [UNK]: lines tokenize until a word needs it, then the reference's KeyError,
// here one line naming the input line and the word, after the lines before it were written. A
// vocabulary repeating a token: google's ids (each line's number), with a warning naming both lines.
TEST(TokenizeCli, MissingUnkNamesTheLineAndWordAndRepeatsAreSaid) {
    const std::string bin = binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    char tmpl[] = "/tmp/bb_tokcli_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    write_file_atomic(dir + "/vocab.txt", "[PAD]\n[CLS]\n[SEP]\nthe\nfox\n");
    std::string input;
    for (int i = 0; i < 5000; ++i) input += "the fox\n";
    write_file_atomic(dir + "/in.txt", input + "the zzz\nfox\n");
    const std::string cmd = bin + " tokenize --vocab_file=" + dir + "/vocab.txt < " + dir + "/in.txt > " + dir +
                            "/out.jsonl 2> " + dir + "/err.txt";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    const std::string err = read_file(dir + "/err.txt");
    EXPECT_NE(err.find("error: stdin line 5001: --vocab_file " + dir + "/vocab.txt: the word \"zzz\" is not in the "
                       "vocabulary, which has no \"[UNK]\" token"),
              std::string::npos) << err;
    const std::string out = read_file(dir + "/out.jsonl");
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 5000);
    write_file_atomic(dir + "/in2.txt", "the dog fox\n");
    // "the dog fox" with a vocabulary that repeats tokens: the ids (the last line's) and the warning
    const auto repeated = [&](const std::string& name, const std::string& vocab, const std::string& ids,
                              const std::string& said) {
        write_file_atomic(dir + "/" + name, vocab);
        const std::string line = bin + " tokenize --vocab_file=" + dir + "/" + name + " < " + dir + "/in2.txt > " +
                                dir + "/out2.jsonl 2> " + dir + "/err2.txt";
        EXPECT_EQ(std::system(line.c_str()), 0);
        EXPECT_EQ(read_file(dir + "/out2.jsonl"), R"({"tokens": ["the", "dog", "fox"], "ids": )" + ids + "}\n");
        EXPECT_NE(read_file(dir + "/err2.txt").find(name + ": line 4 repeats the token \"the\" of line 2" + said),
                  std::string::npos) << read_file(dir + "/err2.txt");
    };
    repeated("repeat.txt", "[UNK]\nthe\nfox\nthe\ndog\n", "[3, 4, 2]", "; ids follow google's tokenization.py");
    // more repeats: the first named, all counted
    repeated("repeat3.txt", "[UNK]\nthe\nfox\nthe\ndog\nfox\n[UNK]\n", "[3, 4, 5]",
             " (3 lines repeat an earlier line's token in all); ids follow");
    fs::remove_all(dir);
}

// A tokenizers tokenizer.json given as --vocab_file: refused in one line (read as lines, its
// punctuation would be numbered as tokens); a vocab.txt whose first token is "{" is still one.
TEST(TokenizeCli, AJsonDocumentAsTheVocabularyIsRefused) {
    const std::string bin = binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    char tmpl[] = "/tmp/bb_tokcli_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    write_file_atomic(dir + "/tokenizer.json", "{\n  \"model\": {\"type\": \"WordPiece\", \"vocab\": {\"[PAD]\": 0}}\n}\n");
    write_file_atomic(dir + "/in.txt", "{ }\n");
    std::string cmd = bin + " tokenize --vocab_file=" + dir + "/tokenizer.json < " + dir + "/in.txt > " + dir +
                      "/out.jsonl 2> " + dir + "/err.txt";
    EXPECT_NE(std::system(cmd.c_str()), 0);
    const std::string err = read_file(dir + "/err.txt");
    EXPECT_NE(err.find("tokenizer.json: expected a vocab.txt (one WordPiece token per line), found a JSON document"),
              std::string::npos) << err;
    write_file_atomic(dir + "/braces.txt", "{\n}\n[UNK]\n");
    cmd = bin + " tokenize --vocab_file=" + dir + "/braces.txt < " + dir + "/in.txt > " + dir + "/out.jsonl 2> " + dir +
          "/err.txt";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << read_file(dir + "/err.txt");
    EXPECT_NE(read_file(dir + "/out.jsonl").find(R"("ids": [0, 1])"), std::string::npos) << read_file(dir + "/out.jsonl");
    fs::remove_all(dir);
}

// A vocabulary saved with a UTF-8 byte-order mark: google's load_vocab keeps the mark in line 1's
// token (str.strip() does not remove it), so "[PAD]" is not a token; the ids stay the reference's and
// a warning says what happened. A write to a full device names its reason.
TEST(TokenizeCli, ByteOrderMarkInTheVocabularyIsSaidAndAFullOutputToo) {
    const std::string bin = binary();
    if (bin.empty()) GTEST_SKIP() << "bertbench binary not built";
    char tmpl[] = "/tmp/bb_tokcli_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    write_file_atomic(dir + "/bom.txt", "\xEF\xBB\xBF[PAD]\n[UNK]\nthe\nfox\n");
    write_file_atomic(dir + "/in.txt", "the fox [PAD]\n");
    const std::string cmd = bin + " tokenize --vocab_file=" + dir + "/bom.txt < " + dir + "/in.txt > " + dir +
                            "/out.jsonl 2> " + dir + "/err.txt";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    const std::string err = read_file(dir + "/err.txt");
    EXPECT_NE(err.find("bom.txt: line 1 starts with a UTF-8 byte-order mark, which google's "
                       "tokenization.load_vocab keeps as part of that line's token: id 0 is the mark followed by "
                       "\"[PAD]\", and \"[PAD]\" itself is not in the vocabulary"),
              std::string::npos) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    // "[PAD]" in the text is split as punctuation: "[", "pad" (unknown), "]"
    const std::string out = read_file(dir + "/out.jsonl");
    EXPECT_NE(out.find(R"("ids": [2, 3, 1, 1, 1])"), std::string::npos) << out;
    write_file_atomic(dir + "/plain.txt", "[PAD]\n[UNK]\nthe\nfox\n");
    const std::string cmd2 = bin + " tokenize --vocab_file=" + dir + "/plain.txt < " + dir + "/in.txt > " + dir +
                             "/out2.jsonl 2> " + dir + "/err2.txt";
    EXPECT_EQ(std::system(cmd2.c_str()), 0);
    EXPECT_EQ(read_file(dir + "/err2.txt"), "");
    // an output that cannot be written says why, even for one short line
    const std::string cmd3 = bin + " tokenize --vocab_file=" + dir + "/plain.txt < " + dir + "/in.txt > /dev/full 2> " +
                             dir + "/err3.txt";
    EXPECT_NE(std::system(cmd3.c_str()), 0);
    EXPECT_EQ(read_file(dir + "/err3.txt"),
              "bertbench tokenize: error: stdout: write failed: " + std::string(std::strerror(ENOSPC)) + "\n");
    fs::remove_all(dir);
}

}  // namespace
}  // namespace bertbench::data
