// Python's random.Random, bit for bit: MT19937 seeded by init_by_array over the 32-bit words of
// |seed| (CPython Modules/_randommodule.c), and the pure-Python methods of Lib/random.py built on
// it (random, getrandbits, _randbelow by rejection, randint, randrange, choice, shuffle).
// Needed so that create_pretraining_data output is byte-identical to the reference. Identical for
// Python 3.6-3.13 (no method used here changed between those versions).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace bertbench {

class PyRandom {
public:
    explicit PyRandom(int64_t seed = 0) { seed_int(seed); }

    // random.seed(n) for an int n: the generator is keyed by the 32-bit words of |n|,
    // least significant first (0 is keyed by the single word 0).
    void seed_int(int64_t seed);
    // Same, for an arbitrarily large decimal integer ("-123", "340282366920938463463374607431768211457").
    void seed_decimal(std::string_view digits);
    // init_by_array(key); an empty key is treated as {0} as CPython does.
    void seed_words(std::span<const uint32_t> key);

    uint32_t genrand_uint32();
    double random();                 // [0, 1), 53 random bits
    uint64_t getrandbits(int k);     // 0 <= k <= 64; CPython's word order for k > 32
    uint64_t randbelow(uint64_t n);  // _randbelow_with_getrandbits; n >= 1
    int64_t randint(int64_t a, int64_t b);        // a <= b, inclusive
    int64_t randrange(int64_t start, int64_t stop);  // start < stop
    int64_t randrange(int64_t stop) { return randrange(0, stop); }

    // random.shuffle(x): Fisher-Yates from the end, j = _randbelow(i + 1).
    template <typename T>
    void shuffle(std::vector<T>& x) {
        shuffle(std::span<T>(x));
    }
    template <typename T>
    void shuffle(std::span<T> x) {
        for (size_t i = x.size(); i-- > 1;) {
            const size_t j = static_cast<size_t>(randbelow(i + 1));
            using std::swap;
            swap(x[i], x[j]);
        }
    }
    template <typename T>
    const T& choice(const std::vector<T>& seq) {
        if (seq.empty()) fail("PyRandom::choice: cannot choose from an empty sequence");
        return seq[static_cast<size_t>(randbelow(seq.size()))];
    }

    // Internal state, for checkpoints: 624 words + position (CPython's getstate() minus gauss).
    std::vector<uint32_t> state() const;
    void set_state(std::span<const uint32_t> words);  // 625 words as returned by state()

private:
    static constexpr int kN = 624;
    void init_genrand(uint32_t s);
    void twist();
    uint32_t mt_[kN];
    int mti_ = kN + 1;
};

}  // namespace bertbench
