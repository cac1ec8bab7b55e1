// --dtype / --precision and the loss-scale flags (see precision_flags.hpp).
#include "cli/precision_flags.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "ops/int8.hpp"

namespace bertbench::cli {

void PrecisionFlags::add(Flags& f, bool training) {
    f.add("dtype", &dtype,
          "GEMM precision: fp32 | bf16 (bf16 operands, fp32 accumulation, fp32 master weights, "
          "optimizer and checkpoints; emulated and slower where the CPU lacks AVX512-BF16/AMX, "
          "and slower than fp32 on Intel's AVX512-BF16 without AMX) | "
          "int8 (inference only: the encoder's and MLM head's dense layers and the attention's products "
          "in int8, weights per channel, activations per token; docs/engine.md). fp16 is refused with "
          "its reason (no fp16 matmul on CPUs here)");
    f.alias("precision", "dtype");
    if (!training) return;
    f.add("loss_scale", &loss_scale,
          "'' (none), 'dynamic' (start at --initial_loss_scale; on a non-finite gradient halve it "
          "and skip the update; double it after --loss_scale_window clean updates) or a fixed "
          "factor. The loss is multiplied by it before the backward and the gradients divided "
          "after; bf16 needs none");
    f.add("initial_loss_scale", &initial_loss_scale, "first factor of --loss_scale=dynamic");
    f.add("loss_scale_window", &loss_scale_window,
          "clean (finite) optimizer updates before --loss_scale=dynamic doubles the factor");
    // PerfZero divides each replica's loss by the replica count; one process here computes the
    // whole global batch's mean loss, which is what that division produces.
    f.add_ignored("scale_loss", false,
                  "in one process (its loss is already the mean over the global batch)");
}

void check_dtype(ops::Precision p, const std::string& flag) {
    if (p == ops::Precision::bf16 && !ops::bf16_native())
        log::warn("--{}=bf16: {}; bf16 is emulated (operands rounded to bf16, multiplied in fp32): "
                  "the same numbers, SLOWER than fp32; timings show correctness, not bf16 speed",
                  flag,
                  (ops::bf16_emulation_forced() ? std::string("BB_BF16_EMULATE is set")
                   : ops::native_precisions().find("bf16") != std::string::npos
                       ? std::string("oneDNN has no kernel for this CPU's bf16 units")
                       : std::string("this CPU has no bf16 units")) +
                      " (the CPU multiplies natively: " + ops::native_precisions() + ")");
    else if (p == ops::Precision::bf16 && !ops::bf16_fast())
        log::warn("--{}=bf16: this CPU multiplies bf16 on AVX512-BF16 without AMX ({}), at half "
                  "its fp32 rate: bf16 runs here but SLOWER than --{}=fp32 (bench --mode=gemm "
                  "--dtype=fp32,bf16 measures both; docs/engine.md \"Where bf16 pays\")",
                  flag, ops::bf16_gemm_impl(), flag);
    if (p == ops::Precision::int8) {
        const std::string impl = ops::int8_gemm_impl();
        if (impl.empty() || impl.find("ref") != std::string::npos)
            fail("--{}=int8: oneDNN offers no int8 matmul kernel on this CPU ({}); use --{}=bf16 or fp32",
                 flag, impl.empty() ? "it refuses the s8 matmul" : "only its reference code, " + impl, flag);
    }
    if (p == ops::Precision::int8 && !ops::int8_native())
        log::warn("--{}=int8: this CPU has no int8 dot-product instructions (no AVX512-VNNI, "
                  "AVX-VNNI or AMX; oneDNN's int8 matmul: {}); int8 runs with 7-bit weights on its "
                  "AVX2 multiply-adds: correct, and it may still beat fp32 here, but these timings are not "
                  "what int8 does on a VNNI CPU",
                  flag, ops::int8_gemm_impl());
}

ops::Precision parse_dtype(const std::string& value, const std::string& flag) {
    const ops::Precision p = ops::parse_precision(value, flag);
    check_dtype(p, flag);
    return p;
}

ops::Precision PrecisionFlags::precision(bool trains) const {
    const ops::Precision p = ops::parse_precision(dtype, "dtype");
    // the refusal before check_dtype's warnings about this CPU, which would not apply to it
    if (trains && p == ops::Precision::int8)
        fail("--dtype=int8: int8 is for inference (eval, squad --do_predict, pretrain --nodo_train "
             "--do_eval, bench --mode=infer); this run trains: use fp32 or bf16");
    check_dtype(p, "dtype");
    return p;
}

}  // namespace bertbench::cli
