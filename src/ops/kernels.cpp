// kernels(): the table of float kernels this process runs (ops/kernels.hpp), chosen on first use.
#include "ops/kernels.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace bertbench::ops {

#ifndef BB_HAVE_AVX512_KERNELS
const Kernels* kernels_table_avx512() { return nullptr; }
#endif

namespace {
bool cpu_has_avx512() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

const Kernels& choose() {
    const char* env = std::getenv("BB_ISA");
    const std::string_view want = env ? env : "";
    const Kernels* avx512 = kernels_for(Isa::avx512);
    if (want == "avx2") return *kernels_table_avx2();
    if (want == "avx512") {
        if (!avx512)
            fail("BB_ISA=avx512: this {} cannot run the AVX-512 kernels (the CPU offers: {}); "
                 "hint: unset BB_ISA or set BB_ISA=avx2",
                 kernels_table_avx512() ? "CPU" : "build (compiled without them)", cpu_isa_summary());
        return *avx512;
    }
    if (!want.empty())
        fail("BB_ISA={}: expected avx2 or avx512 (or unset: the widest the CPU offers: {})", want,
             cpu_isa_summary());
    return avx512 ? *avx512 : *kernels_table_avx2();
}
}  // namespace

const Kernels* kernels_for(Isa isa) {
    if (isa == Isa::avx2) return kernels_table_avx2();
    return cpu_has_avx512() ? kernels_table_avx512() : nullptr;
}

const Kernels& kernels() {
    static const Kernels& k = choose();  // a throw leaves it unset: the next call tries again
    return k;
}

const char* cpu_isa_summary() {
    static const std::string s = [] {
        std::string r;
        const auto add = [&](const char* name, bool has) {
            if (!has) return;
            if (!r.empty()) r += ' ';
            r += name;
        };
        add("avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
        add("avx512f", __builtin_cpu_supports("avx512f"));
        add("avx512bw", __builtin_cpu_supports("avx512bw"));
        add("avx512dq", __builtin_cpu_supports("avx512dq"));
        add("avx512vl", __builtin_cpu_supports("avx512vl"));
        add("avx512bf16", __builtin_cpu_supports("avx512bf16"));
        return r.empty() ? std::string("no avx2") : r;
    }();
    return s.c_str();
}

}  // namespace bertbench::ops
