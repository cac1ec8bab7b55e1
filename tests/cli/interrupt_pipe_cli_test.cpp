// Interrupted under a pipe, as NVIDIA's scripts run pretraining (`bertbench pretrain ... 2>&1 |
// tee log`; Ctrl-C stops tee as well): the run's output goes into a real pipe whose reader reads
// one line and goes away (`| head -1`), then SIGINT. The run must not die of SIGPIPE (141) but
// finish its stop: the checkpoint, results.json "interrupted", the stop message on stderr, exit
// 130. Tiny model, golden records, one thread.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::bertbench_path;
using testing::shared_dir;
using testing::slurp;

struct PipeTmp {
    fs::path dir;
    PipeTmp() {
        char t[] = "/tmp/bb_pipecli_XXXXXX";
        dir = mkdtemp(t);
    }
    ~PipeTmp() { fs::remove_all(dir); }
};

std::vector<std::string> pretrain_args(const std::string& out) {
    return {"pretrain", "--model=tiny",
            "--input_file=" + shared_dir() + "/golden/pretraining/public_128_s12345_d2.tfrecord",
            "--output_dir=" + out, "--train_batch_size=2", "--num_train_steps=100000",
            "--num_warmup_steps=10", "--save_checkpoints_steps=0", "--nodo_eval", "--threads=1"};
}

// Starts the binary with stdout into a pipe, stderr into the same pipe (`2>&1 |`) or into the
// file `err_log`; returns its pid and the pipe's read end in *read_fd.
pid_t spawn_into_pipe(const std::vector<std::string>& args, const std::string& err_log,
                      int* read_fd) {
    int p[2];
    if (pipe(p) != 0) return -1;
    const std::string bin = bertbench_path();
    const pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        if (err_log.empty()) {
            dup2(p[1], 2);
        } else {
            const int fd = open(err_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
        }
        // As a shell starts a pipeline: SIGPIPE at its default action, whatever the test runner set.
        signal(SIGPIPE, SIG_DFL);
        std::vector<char*> argv{const_cast<char*>(bin.c_str())};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        execv(bin.c_str(), argv.data());
        _exit(127);
    }
    close(p[1]);
    *read_fd = p[0];
    return pid;
}

// `| head -1`: reads up to the first newline, then closes the pipe. Returns the line.
std::string head_1(int fd) {
    std::string line;
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') line += c;
    close(fd);
    return line;
}

// Once the first update is logged (the stop handling is installed by then), SIGINT; returns the
// wait status.
int interrupt_when_training(pid_t pid, const std::string& out) {
    if (!testing::wait_for_file(out + "/train_log.jsonl", pid)) {
        int status = 0;
        waitpid(pid, &status, 0);
        return status;
    }
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

void expect_finished_stop(const std::string& out) {
    const json res = json::parse(slurp(out + "/results.json"));
    EXPECT_EQ(res["status"], "interrupted") << res.dump();
    const std::string ckpt = res["last_checkpoint"].get<std::string>();
    EXPECT_EQ(ckpt, out + "/model.ckpt-" + std::to_string(res["global_step"].get<int64_t>()) +
                        ".safetensors");
    EXPECT_TRUE(fs::exists(ckpt)) << ckpt;
}

TEST(InterruptPipeCli, StdoutAndStderrIntoAClosedPipeThenSigintExits130) {
    const PipeTmp tmp;
    const std::string out = (tmp.dir / "run").string();
    int fd = -1;
    const pid_t pid = spawn_into_pipe(pretrain_args(out), "", &fd);
    ASSERT_GT(pid, 0);
    EXPECT_FALSE(head_1(fd).empty());
    const int status = interrupt_when_training(pid, out);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status)
                                   << " (13 = SIGPIPE: the closed pipe killed the stop)";
    EXPECT_EQ(WEXITSTATUS(status), 130);
    expect_finished_stop(out);
}

TEST(InterruptPipeCli, ClosedStdoutThenSigintSaysWhyOnStderr) {
    const PipeTmp tmp;
    const std::string out = (tmp.dir / "run").string();
    const std::string err = (tmp.dir / "stderr.txt").string();
    int fd = -1;
    const pid_t pid = spawn_into_pipe(pretrain_args(out), err, &fd);
    ASSERT_GT(pid, 0);
    close(fd);  // `| true`: nobody reads stdout
    const int status = interrupt_when_training(pid, out);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n"
                                   << slurp(err);
    EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(err);
    expect_finished_stop(out);
    const std::string log = slurp(err);
    EXPECT_NE(log.find("stopped by signal 2 after step"), std::string::npos) << log;
    EXPECT_NE(log.find("Exit status 130"), std::string::npos) << log;
}

}  // namespace
}  // namespace bertbench
