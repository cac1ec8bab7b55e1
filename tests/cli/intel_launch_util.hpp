// Shared by the tests of scripts/launch_benchmark.py (Intel model zoo's launcher): running it, the
// command line it prints, and the checkpoint and dataset directories of Intel's guide.
#pragma once

#include <filesystem>
#include <string>

#include "cli/cli_fixtures.hpp"
#include "dist/mpi_util.hpp"

namespace bertbench::testing {

// python3 scripts/launch_benchmark.py <args>, with this build's bertbench and the tests' mpirun;
// `env`: more VAR=value words before it.
inline RunResult intel_launch(const std::string& args, const std::string& env = "") {
    return run_script("launch_benchmark.py", args,
                               "BERTBENCH_MPIRUN='" + mpirun_command(300) + "' " + env);
}

// The "launch_benchmark.py: running: ..." line of an output.
inline std::string running_line(const std::string& out) {
    const size_t at = out.find("launch_benchmark.py: running: ");
    return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// $CHECKPOINT_DIR (vocab.txt, bert_config.json, the pretrained TF checkpoint bert_model.ckpt) and
// $DATASET_DIR (train-v1.1.json, dev-v1.1.json) of Intel's guide.
struct IntelDirs {
    TmpDir tmp{"bb_intel"};
    std::string checkpoint = tmp.file("wwm_uncased_L-24_H-1024_A-16");
    std::string dataset = tmp.file("SQuAD-1.1");
    IntelDirs() {
        write_tiny_bert_dir(checkpoint, tmp.file("init.safetensors"));
        std::filesystem::create_directories(dataset);
        std::filesystem::copy_file(golden("squad_pipeline/train-v1.1.json"), dataset + "/train-v1.1.json");
        std::filesystem::copy_file(golden("squad_pipeline/dataset-v1.1.json"), dataset + "/dev-v1.1.json");
    }
};

}  // namespace bertbench::testing
