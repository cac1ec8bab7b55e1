// `bertbench tokenize`: FullTokenizer (google-research/bert tokenization.py) over stdin, one
// JSON object {"tokens": [...], "ids": [...]} per input line. Lines end at '\n' only (U+0085,
// U+2028 ... stay inside a line); invalid UTF-8 is dropped as decode(errors='ignore') does.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/reference_flags.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "data/tokenizer.hpp"

namespace bertbench::cli {
namespace {

void append_json_string(std::string& out, std::string_view s) {
    out.push_back('"');
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    char b[8];
                    std::snprintf(b, sizeof b, "\\u%04x", c);
                    out += b;
                } else {
                    out.push_back(ch);  // tokens are valid UTF-8
                }
        }
    }
    out.push_back('"');
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
    std::string vocab_file;
    bool do_lower_case = true;
    Flags flags("tokenize",
                "Tokenize stdin with BERT's FullTokenizer (basic + WordPiece); writes one JSON "
                "object {\"tokens\": [...], \"ids\": [...]} per input line to stdout.");
    flags.add("vocab_file", &vocab_file, "The WordPiece vocabulary (vocab.txt).");
    flags.add("do_lower_case", &do_lower_case, "Lower-case and strip accents (uncased models).");
    TokenizationFlags tokenization;
    tokenization.add(flags);
    flags.allow_any_bytes();  // records no flags in JSON: a Latin-1 path to the vocabulary works
    if (!flags.parse(argc, argv)) return 0;
    tokenization.check();
    if (vocab_file.empty()) fail("--vocab_file is required (the WordPiece vocab.txt)");
    const data::Vocab vocab = data::Vocab::load(vocab_file);
    data::FullTokenizer tok(vocab, do_lower_case);

    std::string in, out, line;
    std::vector<std::string> tokens;
    std::vector<int32_t> ids;
    char buf[1 << 16];
    size_t n, line_no = 0;
    // A failed write stops the work with its reason (a full disk, /dev/full, a closed pipe's EPIPE)
    const auto put = [&out] {
        errno = 0;
        if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
            fail("stdout: write failed: {}", errno != 0 ? std::strerror(errno) : "unknown reason");
        out.clear();
    };
    auto emit = [&](std::string_view text) {
        tokens.clear();
        ids.clear();
        ++line_no;
        try {
            tok.tokenize(text, nullptr, &tokens, &ids);
        } catch (const Error& e) {  // the lines before it printed, as the reference prints them
            std::fwrite(out.data(), 1, out.size(), stdout);
            fail("stdin line {}: {}", line_no, e.what());
        }
        out += "{\"tokens\": [";
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i) out += ", ";
            append_json_string(out, tokens[i]);
        }
        out += "], \"ids\": [";
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i) out += ", ";
            out += std::to_string(ids[i]);
        }
        out += "]}\n";
        if (out.size() > (1 << 16)) put();
    };
    while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
        const size_t scanned = in.size();  // holds no '\n': search only the new bytes
        in.append(buf, n);
        size_t pos = 0, nl = scanned;
        while ((nl = in.find('\n', nl)) != std::string::npos) {
            emit(std::string_view(in).substr(pos, nl - pos));
            pos = ++nl;
        }
        in.erase(0, pos);
    }
    if (std::ferror(stdin)) fail("stdin: read failed ({})", std::strerror(errno));
    if (!in.empty()) emit(in);
    put();
    return 0;
}

}  // namespace bertbench::cli
