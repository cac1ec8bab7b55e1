// Google Benchmark microbenchmarks of every op's forward and backward at BERT-base shapes (seq 128,
// batch 8: N = 1024 tokens, H = 768, I = 3072, 12 heads of 64, P = 160 masked positions,
// V = 30522; attention also at seq 512 × batch 2), of the transposed-B GEMM behind ops::gemm's
// choice of kernel, and of one LAMB step over the BERT-base
// ParamTable. Each benchmark first validates the op against a plain double-precision loop written
// here (numpy.isclose form atol + rtol·|want|) and aborts naming the op, #bad, the worst index, got
// and want; then it times. CI runs them all once (CTest OpsMicro.ValidateSlow). Counters: GFLOP/s
// for matmul-like ops, bytes/s (compulsory traffic: each input read once, each output written once).
// Run: `cmake --build build --target ops_micro && build/bench/ops_micro`. The dense layers', GEMMs',
// LayerNorm's, GELU's and the softmax's are in ops_micro_dense.cpp; what both share in micro_util.hpp.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/philox.hpp"
#include "io/crc32c.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"
#include "ops/activation.hpp"
#include "ops/attention.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/dropout.hpp"
#include "ops/embedding.hpp"
#include "ops/gemm.hpp"
#include "ops/int8.hpp"
#include "ops/int8_vnni.hpp"
#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"
#include "ops/matmul.hpp"
#include "ops/softmax.hpp"
#include "optim/optimizer.hpp"
#include "micro_util.hpp"

namespace {

using namespace bertbench;
using namespace bertbench::micro;

// Attention at N = 1024 tokens: seq T (128 or 512) × batch B = N/T, 12 heads of 64, optionally
// with dropout on the probs (keep 0.9). The reference is a plain double loop per (sequence, head),
// run on sequences 0 and B−1 (all heads at T = 128; heads 0 and 11 at T = 512).
struct AttentionCase {
    int T, B;
    bool dropout;
    std::vector<float> q, k, v, dctx, ctx, probs, scratch, dprobs, dq, dk, dv;
    std::vector<uint8_t> mask;
    std::vector<int32_t> offsets;
    std::vector<size_t> pofs;
    ops::AttentionShape shape;
    ops::DropoutStream stream{1234, 7, 3, kKeep};

    AttentionCase(int seq, bool drop)
        : T(seq), B(kN / seq), dropout(drop), q(random_vec(size_t(kN) * kH, 9)),
          k(random_vec(size_t(kN) * kH, 10)), v(random_vec(size_t(kN) * kH, 11)),
          dctx(random_vec(size_t(kN) * kH, 15)), ctx(size_t(kN) * kH), dq(ctx.size()),
          dk(ctx.size()), dv(ctx.size()), offsets(B + 1), pofs(B + 1) {
        for (int b = 0; b <= B; ++b) offsets[b] = b * T;
        const size_t np = ops::attention_prob_offsets(pofs.data(), offsets.data(), B, kNH);
        probs.resize(np);
        dprobs.resize(np);
        if (dropout) {
            scratch.resize(np);
            mask.resize(np);
        }
        shape = ops::AttentionShape{offsets.data(), pofs.data(), B, kNH, kHS};
    }
    const ops::DropoutStream* drop() const { return dropout ? &stream : nullptr; }
    void forward() {
        ops::attention_forward<float>(ctx.data(), probs.data(), dropout ? scratch.data() : nullptr,
                                      dropout ? mask.data() : nullptr, q.data(), k.data(),
                                      v.data(), shape, drop());
    }
    void backward() {
        ops::attention_backward<float>(dq.data(), dk.data(), dv.data(), dprobs.data(), dctx.data(),
                                       q.data(), k.data(), v.data(), probs.data(),
                                       dropout ? mask.data() : nullptr, float(kKeep), shape);
    }
    std::vector<std::pair<int, int>> validated_heads() const {
        std::vector<std::pair<int, int>> out;
        for (int b : {0, B - 1})
            for (int h = 0; h < kNH; ++h)
                if (T <= 128 || h == 0 || h == kNH - 1) out.emplace_back(b, h);
        return out;
    }
    // channels [h·HS, (h+1)·HS) of the T rows of sequence b of x(N, H)
    std::vector<float> gather(const std::vector<float>& x, int b, int h) const {
        std::vector<float> out;
        for (int i = offsets[b]; i < offsets[b + 1]; ++i)
            out.insert(out.end(), x.begin() + static_cast<long>(i) * kH + h * kHS,
                       x.begin() + static_cast<long>(i) * kH + (h + 1) * kHS);
        return out;
    }
    size_t prob_base(int b, int h) const { return pofs[b] + static_cast<size_t>(h) * T * T; }

    // The (b, h) head in double: probs P, mask, ctx = (P⊙mask/keep) v, and the backward
    // dv = P'ᵀ dctx, dP = (dctx vᵀ)⊙mask/keep, dS = P⊙(dP − rowsum(dP⊙P)), dq = s·dS k,
    // dk = s·dSᵀ q (s = 1/√HS).
    struct Head {
        std::vector<double> p, ctx, dq, dk, dv;
        std::vector<uint8_t> mask;
    };
    Head reference(int b, int h) const {
        const int o = offsets[b];
        const double s = 1 / std::sqrt(static_cast<double>(kHS)), inv_keep = 1 / kKeep;
        const auto at = [&](const std::vector<float>& x, int i, int c) {
            return static_cast<double>(x[static_cast<size_t>(o + i) * kH + h * kHS + c]);
        };
        const size_t tt = static_cast<size_t>(T) * T, ths = static_cast<size_t>(T) * kHS;
        Head r{std::vector<double>(tt), std::vector<double>(ths), std::vector<double>(ths),
               std::vector<double>(ths), std::vector<double>(ths), std::vector<uint8_t>(tt, 1)};
        std::vector<double> pd(tt), dp(tt);  // P' = P⊙mask/keep; dS
        for (int i = 0; i < T; ++i) {
            double mx = -HUGE_VAL, sum = 0;
            double* pi = r.p.data() + static_cast<size_t>(i) * T;
            for (int j = 0; j < T; ++j) {
                double d = 0;
                for (int c = 0; c < kHS; ++c) d += at(q, i, c) * at(k, j, c);
                pi[j] = d * s;
                mx = std::max(mx, pi[j]);
            }
            for (int j = 0; j < T; ++j) sum += pi[j] = std::exp(pi[j] - mx);
            for (int j = 0; j < T; ++j) {
                const size_t e = static_cast<size_t>(i) * T + j;
                pi[j] /= sum;
                if (dropout) r.mask[e] = ref_keep(stream, prob_base(b, h) + e) ? 1 : 0;
                pd[e] = dropout ? (r.mask[e] ? pi[j] * inv_keep : 0.0) : pi[j];
            }
            for (int c = 0; c < kHS; ++c) {
                double a = 0;
                for (int j = 0; j < T; ++j) a += pd[static_cast<size_t>(i) * T + j] * at(v, j, c);
                r.ctx[static_cast<size_t>(i) * kHS + c] = a;
            }
        }
        for (int j = 0; j < T; ++j)
            for (int c = 0; c < kHS; ++c) {
                double a = 0;
                for (int i = 0; i < T; ++i) a += pd[static_cast<size_t>(i) * T + j] * at(dctx, i, c);
                r.dv[static_cast<size_t>(j) * kHS + c] = a;
            }
        for (int i = 0; i < T; ++i) {
            double dot = 0;
            for (int j = 0; j < T; ++j) {
                const size_t e = static_cast<size_t>(i) * T + j;
                double d = 0;
                for (int c = 0; c < kHS; ++c) d += at(dctx, i, c) * at(v, j, c);
                dp[e] = dropout ? (r.mask[e] ? d * inv_keep : 0.0) : d;
                dot += dp[e] * r.p[e];
            }
            for (int j = 0; j < T; ++j) {
                const size_t e = static_cast<size_t>(i) * T + j;
                dp[e] = r.p[e] * (dp[e] - dot);
            }
        }
        for (int i = 0; i < T; ++i)
            for (int c = 0; c < kHS; ++c) {
                double aq = 0, ak = 0;
                for (int j = 0; j < T; ++j) {
                    aq += dp[static_cast<size_t>(i) * T + j] * at(k, j, c);
                    ak += dp[static_cast<size_t>(j) * T + i] * at(q, j, c);
                }
                r.dq[static_cast<size_t>(i) * kHS + c] = s * aq;
                r.dk[static_cast<size_t>(i) * kHS + c] = s * ak;
            }
        return r;
    }
};

void BM_AttentionForward(benchmark::State& state) {
    AttentionCase a(static_cast<int>(state.range(0)), state.range(1) != 0);
    a.forward();
    for (const auto& [b, h] : a.validated_heads()) {
        const auto r = a.reference(b, h);
        const auto name = fmt::format("attention_forward T={} dropout={} seq {} head {}", a.T,
                                      a.dropout, b, h);
        check((name + " probs").c_str(), a.probs.data() + a.prob_base(b, h), r.p, 1e-7, 1e-4);
        if (a.dropout)
            check_equal((name + " mask").c_str(), a.mask.data() + a.prob_base(b, h), r.mask.data(),
                        r.mask.size());
        check((name + " ctx").c_str(), a.gather(a.ctx, b, h), r.ctx, 1e-6, 1e-4);
    }
    for (auto _ : state) {
        a.forward();
        benchmark::DoNotOptimize(a.ctx.data());
    }
    set_gflops(state, 4.0 * a.B * a.T * a.T * kH);  // q kᵀ and P v
}

// The int8 engine's attention (ops/int8.hpp: both products in int8, the softmax in fp32) on the
// same shapes, from q, k and v quantized per row and head as the Q, K and V product leaves them;
// its error is bounded in tests/backend/backend_ops_int8_test.cpp.
void BM_AttentionForwardInt8(benchmark::State& state) {
    AttentionCase a(static_cast<int>(state.range(0)), false);
    const int n = a.B * a.T;
    std::vector<int8_t> qkv(static_cast<size_t>(n) * 3 * kH);
    std::vector<float> scales(static_cast<size_t>(n) * 3 * kNH);
    for (int r = 0; r < n; ++r)
        for (int part = 0; part < 3; ++part)
            for (int h = 0; h < kNH; ++h) {
                const std::vector<float>& x = part == 0 ? a.q : part == 1 ? a.k : a.v;
                const size_t g = static_cast<size_t>(r) * 3 * kNH + static_cast<size_t>(part) * kNH + h;
                ops::kernels().quantize_row_s8(qkv.data() + g * kHS, scales.data() + g,
                                               x.data() + static_cast<size_t>(r) * kH + h * kHS, kHS, 127);
            }
    for (auto _ : state) {
        ops::attention_forward_int8(a.ctx.data(), qkv.data(), scales.data(), a.shape);
        benchmark::DoNotOptimize(a.ctx.data());
    }
    set_gflops(state, 4.0 * a.B * a.T * a.T * kH);
}
BENCHMARK(BM_AttentionForwardInt8)->ArgNames({"T"})->Arg(128)->Arg(384)->Unit(benchmark::kMillisecond)->UseRealTime();

// One head's two products of the int8 attention at BERT-base's shapes (T × 64 · 64 × T, then
// T × T · T × 64; k and v read in place from a Q/K/V row of 3·768 bytes), on the hand-written
// AVX512-VNNI kernel with its packing (way 0, ops/int8_vnni.hpp) or on oneDNN (way 1); the same
// int32 sums, checked here.
void BM_AttentionProductsInt8(benchmark::State& state) {
    const int T = static_cast<int>(state.range(0)), way = static_cast<int>(state.range(1));
    if (way == 0 && !ops::vnni_products()) return state.SkipWithError("no AVX512-VNNI kernels on this CPU");
    const size_t ld = 3 * static_cast<size_t>(kH), t = static_cast<size_t>(T);
    std::mt19937 rng(5);
    std::vector<uint8_t> u(t * t + 3);  // q plus 128 (T × 64), then the probabilities (T × T)
    std::vector<int8_t> kv(t * ld);
    for (auto& x : u) x = static_cast<uint8_t>(rng());
    for (auto& x : kv) x = static_cast<int8_t>(rng());
    std::vector<int32_t> s(t * t), c(t * kHS), s_dnnl(s.size()), c_dnnl(c.size());
    std::vector<int8_t> packed(std::max(ops::vnni_packed_bytes(kHS, T), ops::vnni_packed_bytes(T, kHS)));
    const auto run = [&](int32_t* sp, int32_t* cp, bool vnni) {
        if (vnni) {
            ops::vnni_pack_transposed(packed.data(), kv.data(), ld, kHS, T);
            ops::vnni_product(sp, t, u.data(), kHS, packed.data(), T, T, kHS);
            ops::vnni_pack_rows(packed.data(), kv.data() + kH, ld, T, kHS);
            ops::vnni_product(cp, kHS, u.data(), t, packed.data(), T, kHS, T);
        } else {
            ops::matmul(ops::MatmulType::u8, true, T, T, kHS, u.data(), kHS, kv.data(), static_cast<int>(ld), 0.f, sp,
                        T, nullptr, ops::MatmulType::s32);
            ops::matmul(ops::MatmulType::u8, false, T, kHS, T, u.data(), T, kv.data() + kH, static_cast<int>(ld), 0.f,
                        cp, kHS, nullptr, ops::MatmulType::s32);
        }
    };
    if (ops::vnni_products()) {
        run(s.data(), c.data(), true);
        run(s_dnnl.data(), c_dnnl.data(), false);
        if (s != s_dnnl || c != c_dnnl) return state.SkipWithError("the VNNI kernel's sums differ from oneDNN's");
    }
    for (auto _ : state) {
        run(s.data(), c.data(), way == 0);
        benchmark::DoNotOptimize(c.data());
    }
    set_gflops(state, 4.0 * T * T * kHS);
}
BENCHMARK(BM_AttentionProductsInt8)
    ->ArgNames({"T", "onednn"})
    ->Args({128, 0})
    ->Args({128, 1})
    ->Args({384, 0})
    ->Args({384, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_AttentionBackward(benchmark::State& state) {
    AttentionCase a(static_cast<int>(state.range(0)), state.range(1) != 0);
    a.forward();
    a.backward();
    for (const auto& [b, h] : a.validated_heads()) {
        const auto r = a.reference(b, h);
        const auto name = fmt::format("attention_backward T={} dropout={} seq {} head {}", a.T,
                                      a.dropout, b, h);
        check((name + " dq").c_str(), a.gather(a.dq, b, h), r.dq, 1e-6, 1e-4);
        check((name + " dk").c_str(), a.gather(a.dk, b, h), r.dk, 1e-6, 1e-4);
        check((name + " dv").c_str(), a.gather(a.dv, b, h), r.dv, 1e-6, 1e-4);
    }
    for (auto _ : state) {
        a.backward();
        benchmark::DoNotOptimize(a.dq.data());
    }
    set_gflops(state, 8.0 * kN * a.T * kH);  // dv, dP, dq, dk
}
BENCHMARK(BM_AttentionForward)
    ->ArgNames({"T", "drop"})
    ->Args({128, 0})
    ->Args({128, 1})
    ->Args({384, 0})
    ->Args({512, 0})
    ->Args({512, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_AttentionBackward)
    ->ArgNames({"T", "drop"})
    ->Args({128, 0})
    ->Args({128, 1})
    ->Args({512, 0})
    ->Args({512, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Dropout mask generation for n elements: the hidden states (N·H) and the attention probs of a
// seq-128 batch (B·NH·T²). Validated bit for bit against the scalar definition (ref_keep), after a
// Philox known-answer check (Random123 kat_vectors).
void BM_DropoutMask(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const ops::DropoutStream s{42, 1001, 5, kKeep};
    if (philox::philox4x32_10({0, 0, 0, 0}, {0, 0}) !=
        philox::Counter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}) {
        std::fprintf(stderr, "philox4x32_10: known-answer vector (zero key/counter) mismatch\n");
        std::abort();
    }
    std::vector<uint8_t> mask(n), want(n);
    ops::dropout_fill_mask_parallel(mask.data(), s, n);
    size_t kept = 0;
    for (size_t e = 0; e < n; ++e) kept += want[e] = ref_keep(s, e) ? 1 : 0;
    check_equal("dropout_fill_mask_parallel", mask.data(), want.data(), n);
    if (std::fabs(static_cast<double>(kept) / static_cast<double>(n) - kKeep) > 0.005) {
        std::fprintf(stderr, "dropout_fill_mask_parallel: kept %zu of %zu, want ~%g\n", kept, n,
                     kKeep);
        std::abort();
    }
    for (auto _ : state) {
        ops::dropout_fill_mask_parallel(mask.data(), s, n);
        benchmark::DoNotOptimize(mask.data());
    }
    set_bytes(state, static_cast<double>(n));  // one mask byte written per element
}
BENCHMARK(BM_DropoutMask)
    ->ArgName("n")
    ->Arg(kN * kH)
    ->Arg(kB * kNH * kT * kT)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// y = x·mask/keep + residual (forward, N·H) and dx = dy·mask/keep (backward).
void BM_Dropout(benchmark::State& state) {
    const bool backward = state.range(0) != 0;
    const size_t n = static_cast<size_t>(kN) * kH;
    const ops::DropoutStream s{42, 1001, 6, kKeep};
    const auto x = random_vec(n, 16), res = random_vec(n, 17);
    std::vector<uint8_t> mask(n);
    for (size_t e = 0; e < n; ++e) mask[e] = ref_keep(s, e) ? 1 : 0;
    std::vector<float> y(n);
    std::vector<double> want(n);
    for (size_t i = 0; i < n; ++i)
        want[i] = (mask[i] ? x[i] / kKeep : 0.0) + (backward ? 0.0 : static_cast<double>(res[i]));
    const float keep = static_cast<float>(kKeep);
    if (backward) {
        ops::dropout_backward(y.data(), x.data(), mask.data(), keep, n);
        check("dropout_backward", y, want, 1e-6, 1e-6);
    } else {
        ops::dropout_add_forward(y.data(), x.data(), mask.data(), keep, res.data(), n);
        check("dropout_add_forward", y, want, 1e-6, 1e-6);
    }
    for (auto _ : state) {
        if (backward)
            ops::dropout_backward(y.data(), x.data(), mask.data(), keep, n);
        else
            ops::dropout_add_forward(y.data(), x.data(), mask.data(), keep, res.data(), n);
        benchmark::DoNotOptimize(y.data());
    }
    set_bytes(state, (backward ? 9.0 : 13.0) * static_cast<double>(n));  // fp32 in/out, mask bytes
}
BENCHMARK(BM_Dropout)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Embeddings: word (V×H) + position (512×H) + token type (2×H), N = 8 × 128 tokens; every
// sequence starts with id 101 (so the backward accumulates repeated rows), segment 1 from t = 64.
void BM_Embedding(benchmark::State& state) {
    const bool backward = state.range(0) != 0;
    const auto word = random_vec(static_cast<size_t>(kV) * kH, 18),
               pos = random_vec(static_cast<size_t>(512) * kH, 19),
               type = random_vec(static_cast<size_t>(2) * kH, 20),
               de = random_vec(static_cast<size_t>(kN) * kH, 21);
    std::mt19937 rng(22);
    std::uniform_int_distribution<int32_t> tok(0, kV - 1);
    std::vector<int32_t> ids(kN), seg(kN), offsets(kB + 1);
    for (int i = 0; i < kN; ++i) {
        ids[i] = i % kT == 0 ? 101 : tok(rng);
        seg[i] = i % kT >= kT / 2 ? 1 : 0;
    }
    for (int b = 0; b <= kB; ++b) offsets[b] = b * kT;
    const ops::EmbeddingIndex idx{ids.data(), seg.data(), offsets.data(), kB};
    std::vector<float> e(static_cast<size_t>(kN) * kH);
    std::vector<float> dword(word.size(), 0.0f), dpos(pos.size(), 0.0f), dtype(type.size(), 0.0f);
    if (backward) {
        ops::embedding_backward(dword.data(), dpos.data(), dtype.data(), de.data(), idx, kH);
        std::map<int32_t, std::vector<double>> want_word;  // only the rows used
        std::vector<double> want_pos(pos.size(), 0.0), want_type(type.size(), 0.0);
        for (int i = 0; i < kN; ++i) {
            auto& w = want_word[ids[i]];
            w.resize(kH, 0.0);
            for (int c = 0; c < kH; ++c) {
                const double d = de[static_cast<size_t>(i) * kH + c];
                w[c] += d;
                want_pos[static_cast<size_t>(i % kT) * kH + c] += d;
                want_type[static_cast<size_t>(seg[i]) * kH + c] += d;
            }
        }
        for (const auto& [id, w] : want_word)
            check(fmt::format("embedding_backward dword row {}", id).c_str(),
                  dword.data() + static_cast<size_t>(id) * kH, w, 1e-5, 1e-5);
        size_t nonzero_unused = 0;
        for (int r = 0; r < kV; ++r)
            if (!want_word.count(r))
                for (int c = 0; c < kH; ++c)
                    nonzero_unused += dword[static_cast<size_t>(r) * kH + c] != 0.0f;
        if (nonzero_unused > 0) {
            std::fprintf(stderr, "embedding_backward: %zu nonzero dword values in unused rows\n",
                         nonzero_unused);
            std::abort();
        }
        check("embedding_backward dpos", dpos, want_pos, 1e-5, 1e-5);
        check("embedding_backward dtype", dtype, want_type, 1e-3, 1e-5);
    } else {
        ops::embedding_forward(e.data(), word.data(), pos.data(), type.data(), idx, kH);
        std::vector<double> want(e.size());
        for (int i = 0; i < kN; ++i)
            for (int c = 0; c < kH; ++c)
                want[static_cast<size_t>(i) * kH + c] =
                    static_cast<double>(word[static_cast<size_t>(ids[i]) * kH + c]) +
                    pos[static_cast<size_t>(i % kT) * kH + c] +
                    type[static_cast<size_t>(seg[i]) * kH + c];
        check("embedding_forward", e, want, 1e-6, 1e-6);
    }
    for (auto _ : state) {
        if (backward)
            ops::embedding_backward(dword.data(), dpos.data(), dtype.data(), de.data(), idx, kH);
        else
            ops::embedding_forward(e.data(), word.data(), pos.data(), type.data(), idx, kH);
        benchmark::DoNotOptimize(backward ? dword.data() : e.data());
    }
    // forward: read 3 rows, write 1; backward: read de, read+write 3 rows (per token)
    set_bytes(state, (backward ? 7.0 : 4.0) * 4 * kN * kH);
}
BENCHMARK(BM_Embedding)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// MLM cross-entropy: P = 160 rows × V = 30522 logits; coef = w/(Σw + 1e-5) with w = 1.
void BM_CrossEntropy(benchmark::State& state) {
    const bool backward = state.range(0) != 0;
    const size_t n = static_cast<size_t>(kP) * kV;
    const auto logits = random_vec(n, 23, 8.0f);
    std::mt19937 rng(24);
    std::uniform_int_distribution<int32_t> tok(0, kV - 1);
    std::vector<int32_t> labels(kP), argmax(kP), want_argmax(kP);
    for (auto& l : labels) l = tok(rng);
    std::vector<double> loss(kP), want_loss(kP), want_lse(kP);
    std::vector<float> lse(kP), coef(kP, static_cast<float>(1.0 / (kP + 1e-5))), dlogits(n);
    for (int r = 0; r < kP; ++r) {
        const float* z = logits.data() + static_cast<size_t>(r) * kV;
        int best = 0;
        for (int c = 1; c < kV; ++c)
            if (z[c] > z[best]) best = c;
        double sum = 0;
        for (int c = 0; c < kV; ++c) sum += std::exp(static_cast<double>(z[c]) - z[best]);
        want_argmax[r] = best;
        want_lse[r] = z[best] + std::log(sum);
        want_loss[r] = want_lse[r] - z[labels[r]];
    }
    ops::cross_entropy_forward(loss.data(), argmax.data(), lse.data(), logits.data(),
                               labels.data(), kP, kV);
    check("cross_entropy_forward lse", lse, want_lse, 1e-5, 1e-6);
    const std::vector<float> loss_f(loss.begin(), loss.end());
    check("cross_entropy_forward loss", loss_f, want_loss, 1e-5, 1e-6);
    check_equal("cross_entropy_forward argmax", argmax.data(), want_argmax.data(), kP);
    if (backward) {
        ops::cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), labels.data(),
                                    coef.data(), kP, kV);
        std::vector<double> want(n);
        for (int r = 0; r < kP; ++r)
            for (int c = 0; c < kV; ++c) {
                const size_t i = static_cast<size_t>(r) * kV + c;
                want[i] = static_cast<double>(coef[r]) *
                          (std::exp(logits[i] - want_lse[r]) - (c == labels[r] ? 1.0 : 0.0));
            }
        check("cross_entropy_backward", dlogits, want, 1e-10, 1e-4);
    }
    for (auto _ : state) {
        if (backward)
            ops::cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), labels.data(),
                                        coef.data(), kP, kV);
        else
            ops::cross_entropy_forward(loss.data(), argmax.data(), lse.data(), logits.data(),
                                       labels.data(), kP, kV);
        benchmark::DoNotOptimize(backward ? dlogits.data() : lse.data());
    }
    set_bytes(state, (backward ? 8.0 : 4.0) * static_cast<double>(n));  // logits in (+ dlogits out)
}
BENCHMARK(BM_CrossEntropy)->ArgName("bwd")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// One LAMB step over the BERT-base pretraining ParamTable (~110M floats), from a non-zero state at
// update t = 6 (so bias correction matters). Validated on 4 sampled elements of every tensor (m,
// v and the applied update w_new − w_old) and on every tensor's trust ratio, against a double
// re-implementation of DESIGN.md's formula (full-tensor norms in double).
void BM_LambStep(benchmark::State& state) {
    const model::ParamTable table(model::BertConfig::preset("base"), model::Heads::pretraining);
    const size_t total = table.total_floats();
    optim::Optimizer opt(table, optim::OptimizerConfig{});
    // The reference's hyperparameters are fp32 tensors (TF), 1 − β taken in fp32 (docs/training.md)
    const float b1f = 0.9f, b2f = 0.999f;
    const double b1 = b1f, b2 = b2f, omb1 = 1.0f - b1f, omb2 = 1.0f - b2f, eps = 1e-6f, wd = 0.01f,
                 lr = 0.01f;
    const int t = 6;  // this step's update number (bias correction 1 − β^t)
    std::vector<float> w(total), g(total);
    fill_hash_uniform(w.data(), total, 31, -0.05f, 0.05f);
    fill_hash_uniform(g.data(), total, 32, -0.01f, 0.01f);
    fill_hash_uniform(opt.m().data(), total, 33, -1e-3f, 1e-3f);
    fill_hash_uniform(opt.v().data(), total, 34, 1e-6f, 1e-4f);
    const float b1_pow = static_cast<float>(std::pow(b1, t)), b2_pow = static_cast<float>(std::pow(b2, t));
    opt.set_scalars(t - 1, b1_pow, b2_pow);

    const double bc1 = 1 - static_cast<double>(b1_pow), bc2 = 1 - static_cast<double>(b2_pow);
    const auto& entries = table.entries();
    std::vector<size_t> idx;  // sampled absolute offsets
    std::vector<double> want_m, want_v, want_delta, want_ratio;
    std::vector<float> w_old;
    for (const auto& e : entries) {
        const bool excluded = e.name.find("LayerNorm") != std::string::npos ||
                              e.name.find("layer_norm") != std::string::npos ||
                              e.name.find("bias") != std::string::npos;
        const float* wt = w.data() + e.offset;
        const float* gt = g.data() + e.offset;
        const float* mt = opt.m().data() + e.offset;
        const float* vt = opt.v().data() + e.offset;
        const auto update = [&](size_t i, double& m1, double& v1) {
            m1 = b1 * mt[i] + omb1 * gt[i];
            v1 = b2 * vt[i] + omb2 * static_cast<double>(gt[i]) * gt[i];
            return (m1 / bc1) / (std::sqrt(v1 / bc2) + eps) + (excluded ? 0.0 : wd * wt[i]);
        };
        double w2 = 0, u2 = 0;
#pragma omp parallel for reduction(+ : w2, u2) schedule(static)
        for (long long i = 0; i < static_cast<long long>(e.size); ++i) {
            double m1, v1;
            const double u = update(static_cast<size_t>(i), m1, v1);
            w2 += static_cast<double>(wt[i]) * wt[i];
            u2 += u * u;
        }
        const double r = !excluded && w2 > 0 && u2 > 0 ? std::sqrt(w2) / std::sqrt(u2) : 1.0;
        want_ratio.push_back(r);
        for (size_t i : {size_t(0), e.size / 2, e.size - 1, (e.size * 7919 + 13) % e.size}) {
            double m1, v1;
            const double u = update(i, m1, v1);
            idx.push_back(e.offset + i);
            w_old.push_back(wt[i]);
            want_m.push_back(m1);
            want_v.push_back(v1);
            want_delta.push_back(-r * lr * u);
        }
    }
    opt.step(w, g, static_cast<float>(lr));
    std::vector<float> got_m, got_v, got_delta;
    for (size_t s = 0; s < idx.size(); ++s) {
        got_m.push_back(opt.m()[idx[s]]);
        got_v.push_back(opt.v()[idx[s]]);
        got_delta.push_back(static_cast<float>(static_cast<double>(w[idx[s]]) - w_old[s]));
    }
    check("lamb m (sampled)", got_m, want_m, 2e-10, 1e-5);
    check("lamb v (sampled)", got_v, want_v, 1e-12, 1e-5);
    check("lamb trust ratio (per tensor)", opt.last_trust_ratios(), want_ratio, 0, 1e-4);
    check("lamb update w_new - w_old (sampled)", got_delta, want_delta, 1e-8, 1e-4);

    for (auto _ : state) {
        opt.step(w, g, static_cast<float>(lr));
        benchmark::DoNotOptimize(w.data());
    }
    // read w, g, m, v; write w, m, v (the two-pass LAMB reads w, m, v twice: 40 B/float moved)
    set_bytes(state, 7.0 * 4 * static_cast<double>(table.num_parameters()));
    state.counters["params"] = static_cast<double>(table.num_parameters());
}
BENCHMARK(BM_LambStep)->Unit(benchmark::kMillisecond)->UseRealTime();

// The memory bandwidth BM_LambStep is read against: STREAM's triad a = b + s·c over three arrays of
// BERT-base's parameter count, 12 B/float counted (as STREAM, without the stores' write-allocate
// reads; BM_LambStep counts its 28 B/float the same way). LAMB's bytes/s at this figure means it is
// bound by memory, not by vector width: why src/optim has no AVX-512 copy (docs/engine.md).
void BM_StreamTriad(benchmark::State& state) {
    const size_t n = model::ParamTable(model::BertConfig::preset("base"), model::Heads::pretraining)
                         .total_floats();
    std::vector<float> a(n), b(n), c(n);
    fill_hash_uniform(b.data(), n, 41, -1.0f, 1.0f);
    fill_hash_uniform(c.data(), n, 42, -1.0f, 1.0f);
    const long count = static_cast<long>(n);
    const auto triad = [&] {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < count; ++i) a[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] + 3.0f * c[static_cast<size_t>(i)];
    };
    triad();
    std::vector<float> got;
    std::vector<double> want;
    for (const size_t i : {size_t(0), n / 3, n - 1}) {
        got.push_back(a[i]);
        want.push_back(b[i] + 3.0 * c[i]);
    }
    check("stream triad (sampled)", got, want, 1e-6, 1e-6);
    for (auto _ : state) {
        triad();
        benchmark::DoNotOptimize(a.data());
    }
    set_bytes(state, 12.0 * static_cast<double>(n));
}
BENCHMARK(BM_StreamTriad)->Unit(benchmark::kMillisecond)->UseRealTime();

// The pass over a checkpoint's data that its data_crc32c costs when written and when first read
// (io/safetensors.hpp): CRC-32C of BERT-base's parameters and their two LAMB moments, 12 B/float.
void BM_CheckpointCrc(benchmark::State& state) {
    const size_t n = 3 * model::ParamTable(model::BertConfig::preset("base"), model::Heads::pretraining)
                             .total_floats();
    std::vector<float> v(n);
    fill_hash_uniform(v.data(), n, 43, -1.0f, 1.0f);
    const size_t sample = size_t(1) << 20;  // the hardware loop against the byte table's on 1 MiB
    if (io::crc32c(v.data(), sample) != io::crc32c_portable(v.data(), sample)) {
        std::fprintf(stderr, "checkpoint crc: crc32c differs from crc32c_portable\n");
        std::abort();
    }
    for (auto _ : state) benchmark::DoNotOptimize(io::crc32c(v.data(), n * sizeof(float)));
    set_bytes(state, static_cast<double>(n * sizeof(float)));
}
BENCHMARK(BM_CheckpointCrc)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
