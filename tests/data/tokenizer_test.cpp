// FullTokenizer against the reference goldens (tokenization.py run by Python 3.11, Unicode 14):
// every case of tokenization_{uncased,cased}.jsonl must give the same basic tokens, word pieces
// and ids. A case flagged unicode_version_sensitive may instead match the entry recorded for
// utf8proc's Unicode version in *_other_unicode_versions.jsonl.
#include "data/tokenizer.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/unicode_text.hpp"
#include "test_util.hpp"

namespace bertbench::data {
namespace {

using testing::read_jsonl;
using testing::shared_dir;

std::string from_hex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
        out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
}

struct Result {
    std::vector<std::string> basic, tokens;
    std::vector<int32_t> ids;
};

bool same(const Result& r, const nlohmann::json& want) {
    return r.basic == want["basic_tokens"].get<std::vector<std::string>>() &&
           r.tokens == want["tokens"].get<std::vector<std::string>>() &&
           r.ids == want["ids"].get<std::vector<int32_t>>();
}

void check_file(const std::string& name, bool lower) {
    const std::string dir = shared_dir() + "/golden/tokenization/";
    const auto cases = read_jsonl(dir + name + ".jsonl");
    ASSERT_GT(cases.size(), 300u) << "golden file missing or short: " << dir + name + ".jsonl";
    std::multimap<int, nlohmann::json> other;
    for (auto& j : read_jsonl(dir + name + "_other_unicode_versions.jsonl"))
        if (j["unidata_version"] == uni::unicode_version()) other.emplace(j["id"].get<int>(), j);

    const Vocab vocab = Vocab::load(shared_dir() + "/golden/vocab.txt");
    FullTokenizer tok(vocab, lower);
    int bad = 0, alt = 0;
    for (const auto& c : cases) {
        ASSERT_EQ(c["do_lower_case"].get<bool>(), lower);
        Result r;
        tok.tokenize(from_hex(c["input_hex"].get<std::string>()), &r.basic, &r.tokens, &r.ids);
        bool ok = same(r, c);
        if (!ok && c["unicode_version_sensitive"].get<bool>()) {
            auto [b, e] = other.equal_range(c["id"].get<int>());
            for (auto it = b; it != e && !ok; ++it) ok = same(r, it->second);
            alt += ok;
        }
        // ids alone, through the fast path used by prepare
        std::vector<int32_t> ids;
        tok.tokenize_ids(from_hex(c["input_hex"].get<std::string>()), ids);
        if (ids != r.ids) ok = false;
        if (!ok) {
            ++bad;
            nlohmann::json got = {{"basic_tokens", r.basic}, {"tokens", r.tokens}, {"ids", r.ids}};
            ADD_FAILURE() << name << " case " << c["id"] << " input_hex " << c["input_hex"]
                          << "\n  got  " << got.dump() << "\n  want basic_tokens "
                          << c["basic_tokens"].dump() << " tokens " << c["tokens"].dump()
                          << " ids " << c["ids"].dump();
        }
    }
    EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << cases.size() << " cases differ";
    std::printf("%s: %zu cases, %d matched the Unicode %s alternative\n", name.c_str(),
                cases.size(), alt, uni::unicode_version());
}

TEST(Tokenizer, GoldenUncased) { check_file("tokenization_uncased", true); }
TEST(Tokenizer, GoldenCased) { check_file("tokenization_cased", false); }

TEST(Tokenizer, WordpieceGreedyLongestMatch) {
    const Vocab v = Vocab::from_text("[UNK]\nun\n##aff\n##able\nunaff\n##a\n##ble\nx\n", "test");
    FullTokenizer tok(v, true);
    std::vector<std::string> tokens;
    tok.tokenize("UnAffable x xyz", nullptr, &tokens, nullptr);
    EXPECT_EQ(tokens, (std::vector<std::string>{"unaff", "##able", "x", "[UNK]"}));
}

TEST(Tokenizer, LongWordIsUnk) {
    const Vocab v = Vocab::from_text("[UNK]\na\n##a\n", "test");
    FullTokenizer tok(v, true);
    std::vector<int32_t> ids;
    tok.tokenize_ids(std::string(200, 'a'), ids);
    EXPECT_EQ(ids.size(), 200u);
    ids.clear();
    tok.tokenize_ids(std::string(201, 'a'), ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{0}));
}

// NVIDIA's PyTorch tokenization.py (its run_squad.py's): never_split specials kept whole (after
// _clean_text, cased or not; a token merely containing one is split as usual), every category C*
// dropped (private use U+E000, tag U+E0001, unassigned U+0378: google keeps them), 100 characters
// a word. Each case checked against NVIDIA's unmodified module (session 39).
TEST(Tokenizer, NvidiaPyTorchRules) {
    const Vocab v = Vocab::from_text("[UNK]\n[MASK]\n[SEP]\n[\n]\nmask\nmas\n##k\na\n##a\nx\n##x\n.\n", "test");
    const auto basic = [](bool lower, TokenizerRules rules, const std::string& text) {
        BasicTokenizer b(lower, rules);
        TokenList out;
        b.tokenize(text, out);
        std::vector<std::string> tokens;
        for (size_t i = 0; i < out.size(); ++i) tokens.emplace_back(out[i]);
        return tokens;
    };
    using S = std::vector<std::string>;
    constexpr TokenizerRules nv = TokenizerRules::nvidia_pytorch, google = TokenizerRules::google;
    EXPECT_EQ(basic(true, nv, "x [MASK] [MA\x01SK] [SEP]"), (S{"x", "[MASK]", "[MASK]", "[SEP]"}));
    EXPECT_EQ(basic(false, nv, "[MASK]"), (S{"[MASK]"}));
    EXPECT_EQ(basic(true, google, "x [MASK]"), (S{"x", "[", "mask", "]"}));
    EXPECT_EQ(basic(true, nv, "[MASK]. [mask] [Mask]"), (S{"[", "mask", "]", ".", "[", "mask", "]", "[", "mask", "]"}));
    EXPECT_EQ(basic(false, nv, "a\xee\x80\x80" "a x\xf3\xa0\x80\x81 \xcd\xb8" "x"), (S{"aa", "x", "x"}));
    EXPECT_EQ(basic(false, google, "a\xee\x80\x80" "a \xcd\xb8" "x"), (S{"a\xee\x80\x80" "a", "\xcd\xb8" "x"}));
    FullTokenizer nvidia(v, true, nv), reference(v, true);
    std::vector<int32_t> ids;
    nvidia.tokenize_ids(std::string(100, 'a'), ids);
    EXPECT_EQ(ids.size(), 100u);
    ids.clear();
    nvidia.tokenize_ids(std::string(101, 'a'), ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{0}));
    ids.clear();
    reference.tokenize_ids(std::string(101, 'a'), ids);
    EXPECT_EQ(ids.size(), 101u);
    std::vector<std::string> tokens;
    nvidia.tokenize("x [MASK] [SEP]", nullptr, &tokens, nullptr);
    EXPECT_EQ(tokens, (S{"x", "[MASK]", "[SEP]"}));
}

// transformers' BertTokenizer (slow, 4.28; its legacy run_squad.py's): the special tokens' literal
// occurrences split the text anywhere and are kept whole; lower-casing is per character (no final
// sigma) before the basic tokenizer, so a special token formed by _clean_text is kept whole only
// when cased; C* dropped and 100 characters a word as NVIDIA's. Each case's basic tokens are what
// transformers' own PreTrainedTokenizer.tokenize + BasicTokenizer code returns (session 41).
TEST(Tokenizer, TransformersRules) {
    const Vocab v = Vocab::from_text("[UNK]\n[MASK]\n[SEP]\n[\n]\nmask\nab\ncd\nx\n", "test");
    const auto basic = [&](bool lower, const std::string& text) {
        FullTokenizer t(v, lower, TokenizerRules::transformers);
        std::vector<std::string> words;
        t.tokenize(text, &words, nullptr, nullptr);
        return words;
    };
    using S = std::vector<std::string>;
    for (const bool lower : {true, false}) {
        EXPECT_EQ(basic(lower, "ab[MASK]cd"), (S{"ab", "[MASK]", "cd"}));
        EXPECT_EQ(basic(lower, "[mask]"), (S{"[", "mask", "]"}));
        EXPECT_EQ(basic(lower, "[MASK][SEP]x"), (S{"[MASK]", "[SEP]", "x"}));
        EXPECT_EQ(basic(lower,
                        "a\xee\x80\x80"
                        "b [UNK]"),
                  (S{"ab", "[UNK]"}));  // U+E000 dropped
    }
    EXPECT_EQ(basic(true, "x [MA\x01SK]"), (S{"x", "[", "mask", "]"}));
    EXPECT_EQ(basic(false, "x [MA\x01SK]"), (S{"x", "[MASK]"}));
    EXPECT_EQ(basic(true, "\xce\x9f\xce\x94\xce\x9f\xce\xa3"),  // ΟΔΟΣ -> οδοσ (google: οδος)
              (S{"\xce\xbf\xce\xb4\xce\xbf\xcf\x83"}));
    FullTokenizer t(v, true, TokenizerRules::transformers);
    std::vector<std::string> tokens;
    t.tokenize("ab[MASK]cd " + std::string(101, 'x'), nullptr, &tokens, nullptr);
    EXPECT_EQ(tokens, (S{"ab", "[MASK]", "cd", "[UNK]"}));
    // its BasicTokenizer alone (get_final_text's): no never_split, no trie
    BasicTokenizer b(true, TokenizerRules::transformers);
    TokenList out;
    b.tokenize("[MASK]", out);
    EXPECT_EQ(out.size(), 3u);
}

TEST(Tokenizer, MissingUnkIsAnError) {
    const Vocab v = Vocab::from_text("a\n", "test");
    FullTokenizer tok(v, true);
    std::vector<int32_t> ids;
    tok.tokenize_ids("a", ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{0}));
    EXPECT_THROW(tok.tokenize_ids("b", ids), Error);
}

TEST(Vocab, DuplicatesStripAndCarriageReturns) {
    // "a" twice: id of the last line, one key at the first position. '\r' deleted, strip().
    const Vocab v = Vocab::from_text("a\nb\r\n  c \t\na\n\xc2\xa0\n", "test");
    EXPECT_EQ(v.size(), 5);
    EXPECT_EQ(v.find("a"), 3);
    EXPECT_EQ(v.find("b"), 1);
    EXPECT_EQ(v.find("c"), 2);
    EXPECT_EQ(v.find(""), 4);  // U+00A0 is stripped
    EXPECT_EQ(v.key_ids(), (std::vector<int32_t>{3, 1, 2, 4}));
    // a line that is not UTF-8 (load_vocab's text-mode read stops on it): one line naming it
    const std::string e = testing::error_of([] { (void)Vocab::from_text("a\nb\xff\n", "v.txt"); });
    EXPECT_NE(e.find("v.txt: line 2: expected UTF-8 text, got the byte 0xff at offset 1"), std::string::npos) << e;
}

TEST(Unicode, DecodeIgnoreMatchesPython) {
    // Python: b'a\xe2\x82b\xed\xa0\x80c\xf0\x9f\x98\x80\xc0\xafd\xf4\x90\x80\x80e'.decode(
    //   'utf-8','ignore') == 'ab' + 'c' + '\U0001F600' + 'd' + 'e'
    std::vector<char32_t> cps;
    uni::decode_utf8_ignore("a\xe2\x82" "b\xed\xa0\x80" "c\xf0\x9f\x98\x80\xc0\xaf" "d\xf4\x90\x80\x80" "e", cps);
    EXPECT_EQ(cps, (std::vector<char32_t>{'a', 'b', 'c', 0x1F600, 'd', 'e'}));
}

TEST(Unicode, StripUsesPythonWhitespace) {
    EXPECT_EQ(uni::py_strip("\x1c\xc2\x85 x y\xe3\x80\x80\t"), "x y");
    EXPECT_EQ(uni::py_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");  // U+200B is not whitespace
    EXPECT_EQ(uni::py_lstrip("\x1c\xc2\x85 x y\xe3\x80\x80\t"), "x y\xe3\x80\x80\t");
    EXPECT_EQ(uni::py_lstrip(" \t "), "");
    EXPECT_EQ(uni::py_strip(" \t "), "");
}

}  // namespace
}  // namespace bertbench::data

namespace bertbench::data {
namespace {

// str.lower() of every single code point, and Final_Sigma in context, against /usr/bin/python3.
// Code points unassigned in Python's Unicode version are skipped (utf8proc may be newer).
TEST(Unicode, LowerMatchesPythonForEveryCodePoint) {
    const char* script =
        "import unicodedata,sys\n"
        "out=[]\n"
        "start=None\n"
        "for c in range(0x110001):\n"
        "  un = c<0x110000 and (0xD800<=c<0xE000 or unicodedata.category(chr(c))=='Cn')\n"
        "  if un and start is None: start=c\n"
        "  if not un and start is not None: out.append('u:%x-%x'%(start,c-1)); start=None\n"
        "  if un or c==0x110000: continue\n"
        "  ch=chr(c)\n"
        "  lo=ch.lower()\n"
        "  if lo!=ch: out.append('%x:%s'%(c,','.join('%x'%ord(x) for x in lo)))\n"
        "tests=['\\u03a3','A\\u03a3','A\\u03a3B','A\\u03a3.','A.\\u03a3','\\u03a3A','A\\u03a3\\u0301',"
        "'\\u2160\\u03a3','\\u00aa\\u03a3','A\\u03a3\\u02b0','A\\u03a3:b','\\u1d2c\\u03a3']\n"
        "for t in tests: out.append('s:'+','.join('%x'%ord(x) for x in t.lower()))\n"
        "print(' '.join(out))\n";
    if (system("test -x /usr/bin/python3") != 0) GTEST_SKIP() << "/usr/bin/python3 missing";
    FILE* p = popen((std::string("/usr/bin/python3 -c \"$(cat <<'PYEOF'\n") + script +
                     "PYEOF\n)\"").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string text;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
    ASSERT_EQ(pclose(p), 0);
    std::map<char32_t, std::string> want;  // cp -> lower as hex list (only where it changes)
    std::vector<std::pair<unsigned long, unsigned long>> unassigned;  // sorted ranges
    std::vector<std::string> sigma_want;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t e = text.find_first_of(" \n", pos);
        if (e == std::string::npos) e = text.size();
        const std::string item = text.substr(pos, e - pos);
        pos = e + 1;
        if (item.empty()) continue;
        const size_t colon = item.find(':');
        if (item[0] == 's') {
            sigma_want.push_back(item.substr(colon + 1));
        } else if (item[0] == 'u') {  // u:first-last, unassigned in Python's Unicode version
            const size_t dash = item.find('-');
            unassigned.emplace_back(std::stoul(item.substr(2, dash - 2), nullptr, 16),
                                    std::stoul(item.substr(dash + 1), nullptr, 16));
        } else {
            want[static_cast<char32_t>(std::stoul(item.substr(0, colon), nullptr, 16))] = item.substr(colon + 1);
        }
    }
    ASSERT_GT(want.size(), 1000u);
    ASSERT_GT(unassigned.size(), 100u);
    size_t range = 0;
    auto hex = [](const std::vector<char32_t>& v) {
        std::string s;
        for (char32_t c : v) {
            if (!s.empty()) s += ',';
            char b[16];
            std::snprintf(b, sizeof b, "%x", static_cast<unsigned>(c));
            s += b;
        }
        return s;
    };
    int bad = 0;
    std::string first;
    std::vector<char32_t> in(1), out;
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
        while (range < unassigned.size() && unassigned[range].second < cp) ++range;
        if (range < unassigned.size() && unassigned[range].first <= cp) continue;
        in[0] = cp;
        out.clear();
        uni::py_lower(in, out);
        auto it = want.find(cp);
        if (it == want.end()) {  // Python: unchanged
            if (out.size() != 1 || out[0] != cp) {
                if (bad++ == 0) first = hex(in) + ": got " + hex(out) + " want unchanged";
            }
            continue;
        }
        if (hex(out) != it->second && bad++ == 0)
            first = hex(in) + ": got " + hex(out) + " want " + it->second;
    }
    EXPECT_EQ(bad, 0) << bad << " code points differ; first " << first;
    const std::vector<std::vector<char32_t>> tests = {
        {0x3a3}, {'A', 0x3a3}, {'A', 0x3a3, 'B'}, {'A', 0x3a3, '.'}, {'A', '.', 0x3a3},
        {0x3a3, 'A'}, {'A', 0x3a3, 0x301}, {0x2160, 0x3a3}, {0xaa, 0x3a3}, {'A', 0x3a3, 0x2b0},
        {'A', 0x3a3, ':', 'b'}, {0x1d2c, 0x3a3}};
    ASSERT_EQ(sigma_want.size(), tests.size());
    for (size_t i = 0; i < tests.size(); ++i) {
        out.clear();
        uni::py_lower(tests[i], out);
        EXPECT_EQ(hex(out), sigma_want[i]) << "final sigma case " << i << " (" << hex(tests[i]) << ")";
    }
}

}  // namespace
}  // namespace bertbench::data
