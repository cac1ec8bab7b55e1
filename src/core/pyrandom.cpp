// MT19937 as in CPython Modules/_randommodule.c (genrand_uint32, init_genrand, init_by_array) and
// the Lib/random.py methods layered on it. See pyrandom.hpp.
#include "core/pyrandom.hpp"

#include <bit>
#include <string>

namespace bertbench {
namespace {
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpper = 0x80000000U, kLower = 0x7fffffffU;
}  // namespace

void PyRandom::init_genrand(uint32_t s) {
    mt_[0] = s;
    for (int i = 1; i < kN; ++i)
        mt_[i] = 1812433253U * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    mti_ = kN;
}

void PyRandom::seed_words(std::span<const uint32_t> key_in) {
    static const uint32_t zero = 0;
    std::span<const uint32_t> key = key_in.empty() ? std::span<const uint32_t>(&zero, 1) : key_in;
    const size_t len = key.size();
    init_genrand(19650218U);
    size_t i = 1, j = 0;
    for (size_t k = (kN > len ? kN : len); k; --k) {
        mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] +
                 static_cast<uint32_t>(j);
        ++i;
        ++j;
        if (i >= kN) {
            mt_[0] = mt_[kN - 1];
            i = 1;
        }
        if (j >= len) j = 0;
    }
    for (size_t k = kN - 1; k; --k) {
        mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) -
                 static_cast<uint32_t>(i);
        ++i;
        if (i >= kN) {
            mt_[0] = mt_[kN - 1];
            i = 1;
        }
    }
    mt_[0] = 0x80000000U;
    mti_ = kN;
}

void PyRandom::seed_int(int64_t seed) {
    // |INT64_MIN| does not fit int64; take the magnitude in uint64.
    const uint64_t mag = seed < 0 ? uint64_t(0) - static_cast<uint64_t>(seed) : static_cast<uint64_t>(seed);
    uint32_t words[2] = {static_cast<uint32_t>(mag), static_cast<uint32_t>(mag >> 32)};
    seed_words(std::span<const uint32_t>(words, words[1] != 0 ? 2 : 1));
}

void PyRandom::seed_decimal(std::string_view text) {
    std::string_view digits = text;
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
    if (digits.empty()) fail("random seed: expected an integer, got \"{}\"", text);
    std::vector<uint32_t> words{0};  // little-endian magnitude
    for (char c : digits) {
        if (c < '0' || c > '9') fail("random seed: expected an integer, got \"{}\"", text);
        uint64_t carry = static_cast<uint64_t>(c - '0');
        for (uint32_t& w : words) {
            const uint64_t v = static_cast<uint64_t>(w) * 10U + carry;
            w = static_cast<uint32_t>(v);
            carry = v >> 32;
        }
        if (carry) words.push_back(static_cast<uint32_t>(carry));
    }
    while (words.size() > 1 && words.back() == 0) words.pop_back();
    seed_words(words);
}

void PyRandom::twist() {
    int kk = 0;
    uint32_t y;
    for (; kk < kN - kM; ++kk) {
        y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
        mt_[kk] = mt_[kk + kM] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    for (; kk < kN - 1; ++kk) {
        y = (mt_[kk] & kUpper) | (mt_[kk + 1] & kLower);
        mt_[kk] = mt_[kk + (kM - kN)] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    }
    y = (mt_[kN - 1] & kUpper) | (mt_[0] & kLower);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ ((y & 1U) ? kMatrixA : 0U);
    mti_ = 0;
}

uint32_t PyRandom::genrand_uint32() {
    if (mti_ >= kN) twist();
    uint32_t y = mt_[mti_++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

double PyRandom::random() {
    const uint32_t a = genrand_uint32() >> 5, b = genrand_uint32() >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t PyRandom::getrandbits(int k) {
    if (k < 0 || k > 64) fail("PyRandom::getrandbits: k must be in [0, 64], got {}", k);
    if (k == 0) return 0;
    if (k <= 32) return genrand_uint32() >> (32 - k);
    const uint64_t lo = genrand_uint32();
    const uint64_t hi = genrand_uint32() >> (64 - k);
    return lo | (hi << 32);
}

uint64_t PyRandom::randbelow(uint64_t n) {
    if (n == 0) fail("PyRandom::randbelow: empty range");
    const int k = std::bit_width(n);
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
}

int64_t PyRandom::randint(int64_t a, int64_t b) {
    if (b < a) fail("PyRandom::randint: empty range for randint({}, {})", a, b);
    const uint64_t width = static_cast<uint64_t>(b) - static_cast<uint64_t>(a) + 1U;
    if (width == 0) fail("PyRandom::randint: range of 2^64 values is not supported");
    return static_cast<int64_t>(static_cast<uint64_t>(a) + randbelow(width));
}

int64_t PyRandom::randrange(int64_t start, int64_t stop) {
    if (stop <= start) fail("PyRandom::randrange: empty range for randrange({}, {})", start, stop);
    const uint64_t width = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
    return static_cast<int64_t>(static_cast<uint64_t>(start) + randbelow(width));
}

std::vector<uint32_t> PyRandom::state() const {
    std::vector<uint32_t> s(mt_, mt_ + kN);
    s.push_back(static_cast<uint32_t>(mti_));
    return s;
}

void PyRandom::set_state(std::span<const uint32_t> words) {
    if (words.size() != kN + 1 || words[kN] > static_cast<uint32_t>(kN))
        fail("PyRandom::set_state: expected {} words with position <= {}, got {} words", kN + 1,
             kN, words.size());
    for (int i = 0; i < kN; ++i) mt_[i] = words[static_cast<size_t>(i)];
    mti_ = static_cast<int>(words[kN]);
}

}  // namespace bertbench
