// `bertbench version`: build and system information as JSON.
#include <iostream>

#include "cli/commands.hpp"
#include "core/flags.hpp"
#include "core/sysinfo.hpp"
#include "ops/bf16.hpp"
#include "ops/kernels.hpp"

namespace bertbench::cli {

int cmd_version(int argc, char** argv) {
    Flags flags("version", "Print the build (commit, compiler, flags) and system as JSON.");
    if (!flags.parse(argc, argv)) return 0;
    nlohmann::json j = {{"build_info", sysinfo::build_info()},
                        {"system_info", sysinfo::system_info()}};
    // What --dtype can use here: the CPU's native multiply precisions (CPUID), and the kernel the
    // engine's bf16 GEMMs run on (oneDNN's, or the fp32 emulation).
    j["system_info"]["native_precisions"] = ops::native_precisions();
    j["system_info"]["bf16_gemm"] = ops::bf16_gemm_impl();
    // The instruction set our own float kernels run on (ops/kernels.hpp; BB_ISA=avx2 forces AVX2).
    j["system_info"]["kernels_isa"] = ops::kernels().name;
    j["system_info"]["cpu_isa"] = ops::cpu_isa_summary();
    std::cout << j.dump(2) << "\n";
    return 0;
}

}  // namespace bertbench::cli
