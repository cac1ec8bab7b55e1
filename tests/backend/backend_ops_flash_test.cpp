// The fused attention across tiles: sequences longer than every backend's tiles (the CPU's 64 and
// 128 rows in fp32, the CUDA kernel's 32), so that the online softmax rescales ctx when a later key
// tile raises a row's max, the backward walks several tiles on both sides, and key lengths end
// inside a tile. Against the double-precision materialized attention on the same inputs, fp32 and
// bf16 operands, with and without dropout (the mask is never stored: a different mask would move
// ctx and every gradient far beyond the tolerances). The short-sequence cases are in
// backend_ops_test.cpp (Attention).
#include "backend_ops_util.hpp"
#include "ops/flash_attention.hpp"

namespace bertbench::backend {
namespace {

TEST_P(BackendOps, FlashAttentionAcrossTiles) {
    REQUIRE_OP(flash_attention_forward);
    REQUIRE_OP(flash_attention_backward);
    // Heads of 13, 37 and 100 channels: odd, and each in another of the CUDA kernels' instances
    // (up to 32, 64 and 128 channels: 8, 16, 32 per thread on the CUDA cores, 2, 4, 8 fragments on
    // the tensor cores, whose padding channels must stay out of every product)
    const std::vector<int32_t> offsets = {0, 70, 71, 211}, key_lengths = {45, 1, 133};
    const int NH = 2, B = 3, N = offsets[B];
    for (const int HS : {13, 37, 100}) {
        for (const bool bf16_operands : {false, true})
            for (const bool dropout : {false, true}) {
                const int H = NH * HS;
                const size_t nh = static_cast<size_t>(N) * H;
                const std::vector<float> q = rand_f(nh, 41, 4.0), v = rand_f(nh, 43), dctx = rand_f(nh, 44);
                const std::string what = std::string(bf16_operands ? "bf16" : "fp32") + (dropout ? ", dropout" : "") +
                                         ", HS " + std::to_string(HS);
                std::vector<float> k = rand_f(nh, 42);
                // fp32: keys 79-88 of the long sequence (the CUDA-core kernel's third key tile) raise the
                // rows' max after the first tiles, so ctx and l are rescaled. Not
                // with bf16 operands: queries piling onto a few keys make dv's column sums Σ_i |P'_ij|
                // large, and the tolerance below (from rounding P' to bf16) assumes they are ~1.
                if (!bf16_operands)
                    for (int i = 150; i < 160; ++i)
                        for (int c = 0; c < H; ++c) k[static_cast<size_t>(i) * H + c] *= 3.f;
                // the operands as the backend sees them: bf16 rounds them once
                std::vector<float> qr = q, kr = k, vr = v, dr = dctx;
                if (bf16_operands)
                    for (std::vector<float>* x : {&qr, &kr, &vr, &dr})
                        for (float& e : *x) e = ops::to_float(ops::to_bf16(e));
                const int32_t* hkeys = dropout ? key_lengths.data() : nullptr;
                const ops::DropoutStream stream{7, 3, 11, 0.85};
                const ops::DropoutStream* drop = dropout ? &stream : nullptr;
                const AttentionReference ref =
                    attention_reference(offsets, hkeys, NH, HS, wide(qr), wide(kr), wide(vr), wide(dr), drop);
                const auto& [pofs, ctx, probs, dq, dk, dv, mask] = ref;

                const auto goffs = put(offsets), gkeys = put(key_lengths);
                const auto gpofs = put(pofs);
                const ops::AttentionShape s{goffs->get(), gpofs->get(), B, NH, HS, dropout ? gkeys->get() : nullptr};
                const auto gq = put(qr), gk = put(kr), gv = put(vr), gd = put(dr);
                const auto bq = put(narrow(q)), bk = put(narrow(k)), bv = put(narrow(v)), bd = put(narrow(dctx));
                const ops::FlashBf16 lp{bq->get(), bk->get(), bv->get(), bd->get()};
                const ops::FlashBf16* lpp = bf16_operands ? &lp : nullptr;
                const auto gctx = put(std::vector<float>(nh)), glse = put(std::vector<float>(static_cast<size_t>(N) * NH));
                const auto gdq = put(std::vector<float>(nh, 9.f)), gdk = put(std::vector<float>(nh, 9.f)),
                           gdv = put(std::vector<float>(nh, 9.f));  // overwritten, zero rows included
                BB_OP(be(), flash_attention_forward)(gctx->get(), glse->get(), gq->get(), gk->get(), gv->get(), s, drop,
                                                     lpp);
                BB_OP(be(), flash_attention_backward)(gdq->get(), gdk->get(), gdv->get(), gd->get(), gq->get(), gk->get(),
                                                      gv->get(), gctx->get(), glse->get(), s, drop, lpp);
                const std::vector<double> lse = reference_lse(offsets, hkeys, NH, HS, qr, kr, ref);
                // bf16: the backend may round P and dS to bf16 for its products (backend_ops_test.cpp,
                // AttentionBf16Inputs); fp32: sums of up to 140 terms
                const double atol = bf16_operands ? 4e-3 : kAtolSum, rtol = bf16_operands ? 1.0 / 64 : kRtolSum;
                EXPECT_TRUE(all_close("flash ctx (" + what + ")", gctx->download(), ctx, atol, rtol));
                EXPECT_TRUE(all_close("flash lse (" + what + ")", glse->download(), lse, 1e-4, 1e-4));
                EXPECT_TRUE(all_close("flash dq (" + what + ")", gdq->download(), dq, atol, rtol));
                EXPECT_TRUE(all_close("flash dk (" + what + ")", gdk->download(), dk, atol, rtol));
                EXPECT_TRUE(all_close("flash dv (" + what + ")", gdv->download(), dv, atol, rtol));
            }
    }
}

}  // namespace
}  // namespace bertbench::backend
