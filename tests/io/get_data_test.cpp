// scripts/get-data.sh's conversions, offline: vocab_from_json.py on a tiny synthetic vocab.json
// and brown_to_text.py on a tiny synthetic Brown directory (no network; CI runs offline).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/fs.hpp"
#include "io_test_util.hpp"

namespace bertbench::io {
namespace {

using testing::TempDir;

std::string script(const std::string& name) {
    // $BB_SOURCE_DIR, else the source tree this file was compiled from (tests/io/ -> ../..).
    const char* d = std::getenv("BB_SOURCE_DIR");
    const std::string root =
        d ? d : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
    return root + "/scripts/" + name;
}

int sh(const std::string& cmd) {
    const int rc = std::system(cmd.c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(GetData, VocabFromJsonRules) {
    TempDir tmp;
    // [PAD], bare word-start (index 1), [unused1], specials, word starts, continuations, and a
    // piece that looks special but is not ("[foo]" -> "##[foo]").
    write_file_atomic(tmp.file("v.json"),
                      "[\"[PAD]\", \"\u2581\", \"[unused1]\", \"[UNK]\", \"[CLS]\", \"[SEP]\", "
                      "\"[MASK]\", \"\u2581the\", \"ing\", \"\u2581\u00e9t\u00e9\", \"[foo]\", "
                      "\"\u2581!\", \"!\"]");
    ASSERT_EQ(sh("/usr/bin/python3 '" + script("vocab_from_json.py") + "' '" + tmp.file("v.json") +
                 "' '" + tmp.file("vocab.txt") + "'"),
              0);
    EXPECT_EQ(
        read_file(tmp.file("vocab.txt")),
        "[PAD]\n[unused0]\n[unused1]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n##ing\n\u00e9t\u00e9\n"
        "##[foo]\n!\n##!\n");
    // A bare word-start piece anywhere but index 1 is rejected, and nothing is written.
    write_file_atomic(tmp.file("bad.json"), "[\"[PAD]\", \"a\", \"\u2581\"]");
    EXPECT_NE(sh("/usr/bin/python3 '" + script("vocab_from_json.py") + "' '" +
                 tmp.file("bad.json") + "' '" + tmp.file("bad.txt") + "' 2>/dev/null"),
              0);
    EXPECT_FALSE(std::filesystem::exists(tmp.file("bad.txt")));
}

TEST(GetData, VocabMatchesGoldenWhenRebuiltFromItsOwnJson) {
    // Inverse-map the golden vocab.txt to the npm JSON form, convert back: must be identical.
    TempDir tmp;
    const std::string golden = testing::golden("vocab.txt");
    const std::string py =
        "import json,sys\n"
        "toks=open(sys.argv[1],encoding='utf-8').read().split('\\n')[:-1]\n"
        "import re\n"
        "sp=re.compile(r'^\\[(PAD|UNK|CLS|SEP|MASK|unused[0-9]+)\\]$')\n"
        "out=[]\n"
        "for i,t in enumerate(toks):\n"
        "  if i==1: out.append('\\u2581')\n"
        "  elif sp.match(t): out.append(t)\n"
        "  elif t.startswith('##'): out.append(t[2:])\n"
        "  else: out.append('\\u2581'+t)\n"
        "json.dump(out,open(sys.argv[2],'w',encoding='utf-8'),ensure_ascii=False)\n";
    write_file_atomic(tmp.file("inv.py"), py);
    ASSERT_EQ(sh("/usr/bin/python3 '" + tmp.file("inv.py") + "' '" + golden + "' '" +
                 tmp.file("v.json") + "'"),
              0);
    ASSERT_EQ(sh("/usr/bin/python3 '" + script("vocab_from_json.py") + "' '" + tmp.file("v.json") +
                 "' '" + tmp.file("vocab.txt") + "'"),
              0);
    EXPECT_TRUE(read_file(tmp.file("vocab.txt")) == read_file(golden));
}

TEST(GetData, BrownToText) {
    TempDir tmp;
    std::filesystem::create_directories(tmp.path / "brown");
    for (int i = 1; i <= 4; ++i)
        write_file_atomic(tmp.file(fmt::format("brown/ca0{}", i)),
                          fmt::format("\n\n\tThe/at Jury/nn-tl said/vbd ``/`` no/at ''/'' ./.\n\n\n"
                                      "\tDoc/nn {}/cd 1/2/cd ./.\n",
                                      i));
    write_file_atomic(tmp.file("brown/README"), "not a document\n");
    ASSERT_EQ(sh("/usr/bin/python3 '" + script("brown_to_text.py") + "' '" + tmp.file("brown") +
                 "' '" + tmp.file("out") + "' 2 4 >/dev/null"),
              0);
    // Documents 0, 1, 2 -> train shards 0, 1, 0; document 3 (every 4th) -> eval.
    EXPECT_EQ(read_file(tmp.file("out/train-00000-of-00002.txt")),
              "The Jury said \" no \" .\nDoc 1 1/2 .\n\nThe Jury said \" no \" .\nDoc 3 1/2 .\n");
    EXPECT_EQ(read_file(tmp.file("out/train-00001-of-00002.txt")),
              "The Jury said \" no \" .\nDoc 2 1/2 .\n");
    EXPECT_EQ(read_file(tmp.file("out/eval.txt")), "The Jury said \" no \" .\nDoc 4 1/2 .\n");
}

}  // namespace
}  // namespace bertbench::io
