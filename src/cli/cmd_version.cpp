// `bertbench version`: build and system information as JSON.
#include <unistd.h>

#include <iostream>

#include "backend/backend.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/sysinfo.hpp"
#include "dist/comm.hpp"
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
    // whether that kernel outruns sgemm here (what make demo and int8's attention choose by)
    j["system_info"]["bf16_faster_than_fp32"] = ops::bf16_fast();
    // The instruction set our own float kernels run on (ops/kernels.hpp; BB_ISA=avx2 forces AVX2).
    j["system_info"]["kernels_isa"] = ops::kernels().name;
    j["system_info"]["cpu_isa"] = ops::cpu_isa_summary();
    // The backends this build has (docs/gpu.md): the GPU, its driver, CUDA and cuBLASLt versions
    // where the CUDA backend is built and a GPU is there, else why not.
    nlohmann::json cuda;
    if (!backend::cuda_built()) {
        cuda = {{"built", false}};
    } else {
        try {
            cuda = {{"built", true}, {"device", backend::make_cuda_backend(0)->describe()}};
        } catch (const Error& e) {
            cuda = {{"built", true}, {"device", nullptr}, {"why", e.what()}};
        }
    }
    j["system_info"]["backends"] = {{"cpu", backend::make_cpu_backend()->describe()}, {"cuda", cuda}};
    // Under mpirun: one JSON array from rank 0, each rank's object with its rank and host (each
    // rank printing its own tore the documents into each other's lines).
    dist::Comm& comm = dist::world();
    if (comm.size() > 1) {
        char host[256] = {};
        if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
        j = nlohmann::json{{"rank", comm.rank()}, {"hostname", host}, {"build_info", j["build_info"]},
                           {"system_info", j["system_info"]}};
        nlohmann::json all = nlohmann::json::array();
        for (const std::string& one : comm.allgather(j.dump())) all.push_back(nlohmann::json::parse(one));
        if (comm.is_root()) std::cout << all.dump(2) << "\n";
        return 0;
    }
    std::cout << j.dump(2) << "\n";
    return 0;
}

}  // namespace bertbench::cli
