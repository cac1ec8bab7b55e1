// The Unicode pieces of Python that tokenization.py and create_pretraining_data.py rely on, on top
// of utf8proc's character database: bytes.decode("utf-8", "ignore"), str.isspace()/strip(),
// str.lower() (full mapping: U+0130 -> "i\u0307", and the Final_Sigma rule), NFD, and the
// reference's _is_whitespace/_is_control/_is_punctuation/_is_chinese_char classes.
// Results follow the Unicode version of utf8proc (unicode_version()), not Python's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bertbench::data::uni {

const char* unicode_version();  // of the linked utf8proc, e.g. "15.0.0"

// Appends the code points of `bytes` to `out`, dropping every byte that is not part of a valid
// UTF-8 sequence exactly as Python's decode("utf-8", errors="ignore") does (overlongs,
// surrogates, > U+10FFFF and truncated sequences are dropped; decoding resumes at the next byte).
void decode_utf8_ignore(std::string_view bytes, std::vector<char32_t>& out);
// Drops invalid bytes (as above) and returns valid UTF-8.
std::string sanitize_utf8(std::string_view bytes);
void append_utf8(std::string& out, char32_t cp);

bool py_isspace(char32_t cp);          // str.isspace() for one character (Python 3.11 set)
std::string_view py_strip(std::string_view utf8);  // str.strip() on valid UTF-8
std::string_view py_lstrip(std::string_view utf8);  // str.lstrip()

bool is_whitespace(char32_t cp);   // tokenization._is_whitespace: ' ', \t, \n, \r or Zs
bool is_control(char32_t cp);      // tokenization._is_control: Cc or Cf, except \t \n \r
bool is_other(char32_t cp);        // NVIDIA's _is_control: any category C* (Cc Cf Cs Co Cn), except \t \n \r
bool is_punctuation(char32_t cp);  // tokenization._is_punctuation: ASCII non-alnum or P*
bool is_chinese_char(char32_t cp); // tokenization._is_chinese_char: CJK ideograph blocks
bool is_mn(char32_t cp);           // general category Mn

// str.lower() of the string `in` (a whole whitespace-delimited token: Final_Sigma looks at
// the neighbours within it). Appends to `out`.
void py_lower(const std::vector<char32_t>& in, std::vector<char32_t>& out);
// unicodedata.normalize("NFD", s) followed by removing category Mn (tokenization's
// _run_strip_accents). Appends to `out`.
void nfd_strip_accents(const std::vector<char32_t>& in, std::vector<char32_t>& out);
// The same, each output character with the position of the input character it came from
// (in_pos[i] belongs to in[i]).
void nfd_strip_accents(const std::vector<char32_t>& in, const std::vector<uint32_t>& in_pos,
                       std::vector<char32_t>& out, std::vector<uint32_t>& out_pos);
// Rust's char::is_whitespace (the White_Space property), which HuggingFace tokenizers uses.
bool is_rust_whitespace(char32_t cp);

}  // namespace bertbench::data::uni
