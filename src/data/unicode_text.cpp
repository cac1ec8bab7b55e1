// Python-compatible Unicode helpers over utf8proc. See unicode_text.hpp. The only places where
// Python's str.lower() differs from utf8proc_tolower are the full mapping of U+0130 and the
// context-dependent capital sigma (CPython Objects/unicodeobject.c handle_capital_sigma).
#include "data/unicode_text.hpp"

#include <utf8proc.h>

#include <algorithm>

namespace bertbench::data::uni {
namespace {

utf8proc_category_t category(char32_t cp) {
    return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

// DerivedCoreProperties "Cased": Lowercase, Uppercase or Lt. Other_Lowercase/Other_Uppercase
// letters without case mappings (modifier letters ª º ʰ.. and the like) are listed by range.
bool is_cased(char32_t cp) {
    const auto c = category(cp);
    if (c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT)
        return true;
    const auto i = static_cast<utf8proc_int32_t>(cp);
    if (utf8proc_tolower(i) != i || utf8proc_toupper(i) != i) return true;  // e.g. Ⓐ ⓐ Ⅰ ⅰ
    static constexpr char32_t kOther[][2] = {
        {0xAA, 0xAA},       {0xBA, 0xBA},       {0x2B0, 0x2B8},     {0x2C0, 0x2C1},
        {0x2E0, 0x2E4},     {0x345, 0x345},     {0x37A, 0x37A},     {0x10FC, 0x10FC},
        {0x1D2C, 0x1D6A},   {0x1D78, 0x1D78},   {0x1D9B, 0x1DBF},   {0x2071, 0x2071},
        {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2170, 0x217F},   {0x24D0, 0x24E9},
        {0x2C7C, 0x2C7D},   {0xA69C, 0xA69D},   {0xA770, 0xA770},   {0xA7F2, 0xA7F4},
        {0xA7F8, 0xA7F9},   {0xAB5C, 0xAB5F},   {0xAB69, 0xAB69},   {0x10780, 0x10780},
        {0x10783, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x1E030, 0x1E06D},
        {0x2160, 0x216F},   {0x24B6, 0x24CF},   {0x1F130, 0x1F149}, {0x1F150, 0x1F169},
        {0x1F170, 0x1F189}};
    for (const auto& r : kOther)
        if (cp >= r[0] && cp <= r[1]) return true;
    return false;
}

// DerivedCoreProperties "Case_Ignorable": Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter,
// MidNumLet or Single_Quote.
bool is_case_ignorable(char32_t cp) {
    switch (category(cp)) {
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_CF:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_SK:
            return true;
        default:
            break;
    }
    switch (cp) {
        case 0x27: case 0x2E: case 0x3A: case 0xB7: case 0x387: case 0x55F: case 0x5F4:
        case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13: case 0xFE52:
        case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
            return true;
        default:
            return false;
    }
}

}  // namespace

const char* unicode_version() { return utf8proc_unicode_version(); }

void decode_utf8_ignore(std::string_view s, std::vector<char32_t>& out) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const unsigned c = p[i];
        if (c < 0x80) {
            out.push_back(c);
            ++i;
            continue;
        }
        auto cont = [&](size_t k, unsigned lo, unsigned hi) {
            return i + k < n && p[i + k] >= lo && p[i + k] <= hi;
        };
        if (c >= 0xC2 && c <= 0xDF) {
            if (cont(1, 0x80, 0xBF)) {
                out.push_back(((c & 0x1F) << 6) | (p[i + 1] & 0x3F));
                i += 2;
                continue;
            }
        } else if (c >= 0xE0 && c <= 0xEF) {
            const unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            if (cont(1, lo, hi) && cont(2, 0x80, 0xBF)) {
                out.push_back(((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F));
                i += 3;
                continue;
            }
        } else if (c >= 0xF0 && c <= 0xF4) {
            const unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (cont(1, lo, hi) && cont(2, 0x80, 0xBF) && cont(3, 0x80, 0xBF)) {
                out.push_back(((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) |
                              ((p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F));
                i += 4;
                continue;
            }
        }
        // Invalid here: drop this byte. The rest of a maximal invalid subpart consists of
        // continuation bytes, which are dropped one by one in turn, as Python drops the subpart.
        ++i;
    }
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string sanitize_utf8(std::string_view bytes) {
    bool ascii = true;
    for (char c : bytes) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(bytes);
    std::vector<char32_t> cps;
    decode_utf8_ignore(bytes, cps);
    std::string out;
    out.reserve(bytes.size());
    for (char32_t cp : cps) append_utf8(out, cp);
    return out;
}

bool py_isspace(char32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

namespace {

// The code point starting at byte i of valid UTF-8 (whitespace characters are at most 3 bytes
// long; anything longer reads as U+FFFD), and its length.
size_t decode_lead(std::string_view s, size_t i, char32_t& cp) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        cp = c;
        return 1;
    }
    if ((c & 0xE0) == 0xC0 && i + 1 < s.size()) {
        cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
        return 2;
    }
    if ((c & 0xF0) == 0xE0 && i + 2 < s.size()) {
        cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3Fu) << 6) |
             (static_cast<unsigned char>(s[i + 2]) & 0x3Fu);
        return 3;
    }
    cp = 0xFFFD;
    return 1;
}

}  // namespace

std::string_view py_lstrip(std::string_view s) {
    size_t b = 0;
    while (b < s.size()) {
        char32_t cp;
        const size_t len = decode_lead(s, b, cp);
        if (!py_isspace(cp)) break;
        b += len;
    }
    return s.substr(b);
}

std::string_view py_strip(std::string_view s) {
    s = py_lstrip(s);
    size_t e = s.size();
    while (e > 0) {
        size_t start = e - 1;
        while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        char32_t cp;
        decode_lead(s, start, cp);
        if (!py_isspace(cp)) break;
        e = start;
    }
    return s.substr(0, e);
}

bool is_whitespace(char32_t cp) {
    if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return true;
    if (cp < 0x80) return false;
    return category(cp) == UTF8PROC_CATEGORY_ZS;
}

bool is_control(char32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
    const auto c = category(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF;
}

bool is_other(char32_t cp) {
    if (cp == '\t' || cp == '\n' || cp == '\r') return false;
    if (cp < 0x80) return cp < 0x20 || cp == 0x7F;
    const auto c = category(cp);
    return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
           c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN;
}

bool is_punctuation(char32_t cp) {
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
        (cp >= 123 && cp <= 126))
        return true;
    if (cp < 0x80) return false;
    const auto c = category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_chinese_char(char32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_mn(char32_t cp) { return cp >= 0x80 && category(cp) == UTF8PROC_CATEGORY_MN; }

void py_lower(const std::vector<char32_t>& in, std::vector<char32_t>& out) {
    const size_t n = in.size();
    for (size_t i = 0; i < n; ++i) {
        const char32_t cp = in[i];
        if (cp < 0x80) {
            out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        } else if (cp == 0x130) {  // SpecialCasing: İ -> i + COMBINING DOT ABOVE
            out.push_back('i');
            out.push_back(0x307);
        } else if (cp == 0x3A3) {  // Final_Sigma: cased case-ignorable* Σ !(case-ignorable* cased)
            size_t j = i;
            while (j > 0 && is_case_ignorable(in[j - 1])) --j;
            bool final_sigma = j > 0 && is_cased(in[j - 1]);
            if (final_sigma) {
                size_t k = i + 1;
                while (k < n && is_case_ignorable(in[k])) ++k;
                final_sigma = k == n || !is_cased(in[k]);
            }
            out.push_back(final_sigma ? 0x3C2 : 0x3C3);
        } else {
            out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
        }
    }
}

namespace {

// nfd_strip_accents with an optional source position per character (in_pos[i] for in[i]; each
// character of a decomposition keeps its source's).
void nfd_strip(const std::vector<char32_t>& in, const std::vector<uint32_t>* in_pos,
               std::vector<char32_t>& out, std::vector<uint32_t>* out_pos) {
    // Decompose each character fully (canonical), then put runs of non-starters in canonical
    // order (stable sort by combining class), then drop Mn.
    struct Cp {
        char32_t cp;
        int ccc;
        uint32_t pos;
    };
    thread_local std::vector<Cp> buf;
    buf.clear();
    utf8proc_int32_t tmp[32];
    for (size_t i = 0; i < in.size(); ++i) {
        const char32_t cp = in[i];
        const uint32_t pos = in_pos ? (*in_pos)[i] : 0;
        if (cp < 0xC0) {
            buf.push_back({cp, 0, pos});
            continue;
        }
        int last_boundclass = 0;
        const auto len = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), tmp, 32,
                                                 UTF8PROC_DECOMPOSE, &last_boundclass);
        if (len <= 0 || len > 32) {
            buf.push_back(
                {cp, utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class,
                 pos});
            continue;
        }
        for (int k = 0; k < len; ++k)
            buf.push_back({static_cast<char32_t>(tmp[k]),
                           utf8proc_get_property(tmp[k])->combining_class, pos});
    }
    for (size_t i = 0; i < buf.size();) {
        if (buf[i].ccc == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < buf.size() && buf[j].ccc != 0) ++j;
        std::stable_sort(buf.begin() + static_cast<std::ptrdiff_t>(i),
                         buf.begin() + static_cast<std::ptrdiff_t>(j),
                         [](const Cp& a, const Cp& b) { return a.ccc < b.ccc; });
        i = j;
    }
    for (const Cp& c : buf)
        if (!is_mn(c.cp)) {
            out.push_back(c.cp);
            if (out_pos) out_pos->push_back(c.pos);
        }
}

}  // namespace

void nfd_strip_accents(const std::vector<char32_t>& in, std::vector<char32_t>& out) {
    nfd_strip(in, nullptr, out, nullptr);
}

void nfd_strip_accents(const std::vector<char32_t>& in, const std::vector<uint32_t>& in_pos,
                       std::vector<char32_t>& out, std::vector<uint32_t>& out_pos) {
    nfd_strip(in, &in_pos, out, &out_pos);
}

bool is_rust_whitespace(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

}  // namespace bertbench::data::uni
