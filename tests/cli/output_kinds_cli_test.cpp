// Where outputs go when the output path is not a plain file name, on the real binary: through a
// symbolic link into the file it names (the link stays), straight into a FIFO or a character
// device (never replacing it by a regular file), refused for HDF5 where seeks are needed; the
// temporaries of a run stopped by SIGTERM or SIGHUP are removed; a full disk under an HDF5 output
// is a one-line error, not a crash at exit; a --log_file that cannot be written fails before any
// output appears; corrupt records skipped with --skip_corrupt_records are said.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/run_util.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {
namespace fs = std::filesystem;
using testing::bertbench_path;
using testing::golden;
using testing::matching_files;
using testing::run_bertbench;
using testing::run_shell;
using testing::slurp;

struct OutDir {
    testing::TmpDir tmp;
    const fs::path& dir = tmp.path;
    explicit OutDir(const std::string& name) : tmp("bb_outkinds_" + name) {
        std::ofstream(dir / "c.txt")
            << "Hello world.\nSecond sentence here.\n\nAnother document.\nIts second line.\n";
    }
    std::string p(const std::string& name) const { return tmp.file(name); }
    // prepare of the small corpus to `out` (shell words appended)
    testing::RunResult prepare(const std::string& out, const std::string& more = "") const {
        return run_bertbench("prepare --input_file=" + p("c.txt") + " --output_file='" + out +
                             "' --vocab_file=" + golden("vocab.txt") + " --dupe_factor=1 " + more);
    }
};

bool is_kind(const std::string& path, unsigned kind, bool follow = false) {
    struct stat st {};
    return (follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) == 0 &&
           (st.st_mode & S_IFMT) == kind;
}

TEST(OutputKindsCli, LinksAreWrittenThroughAndStayLinks) {
    OutDir w("links");
    ASSERT_EQ(w.prepare(w.p("plain.tfrecord")).exit_code, 0);
    const std::string want = slurp(w.p("plain.tfrecord"));
    ASSERT_FALSE(want.empty());
    std::ofstream(w.p("target.tfrecord")) << "precious";
    fs::create_symlink("target.tfrecord", w.p("link.tfrecord"));
    fs::create_symlink("link.tfrecord", w.p("link2.tfrecord"));  // a chain
    const auto r = w.prepare(w.p("link2.tfrecord"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(is_kind(w.p("link2.tfrecord"), S_IFLNK));
    EXPECT_TRUE(is_kind(w.p("link.tfrecord"), S_IFLNK));
    EXPECT_EQ(slurp(w.p("target.tfrecord")), want);
    // A dangling link: the file it names is created.
    fs::create_symlink("made.tfrecord", w.p("dangling.tfrecord"));
    ASSERT_EQ(w.prepare(w.p("dangling.tfrecord")).exit_code, 0);
    EXPECT_TRUE(is_kind(w.p("dangling.tfrecord"), S_IFLNK));
    EXPECT_EQ(slurp(w.p("made.tfrecord")), want);
    // HDF5 through a link too.
    fs::create_symlink("t.hdf5", w.p("l.hdf5"));
    ASSERT_EQ(w.prepare(w.p("l.hdf5"), "--output_format=hdf5").exit_code, 0);
    EXPECT_TRUE(is_kind(w.p("l.hdf5"), S_IFLNK));
    EXPECT_TRUE(is_kind(w.p("t.hdf5"), S_IFREG));
    EXPECT_TRUE(matching_files(w.dir.string(), R"(.*\.tmp\.\d+)").empty());
}

TEST(OutputKindsCli, FifosAndDevicesAreWrittenIntoNotReplaced) {
    OutDir w("fifo");
    ASSERT_EQ(w.prepare(w.p("plain.tfrecord")).exit_code, 0);
    const std::string want = slurp(w.p("plain.tfrecord"));
    ASSERT_EQ(::mkfifo(w.p("pipe.tfrecord").c_str(), 0600), 0);
    std::string got;
    // the reader blocks until the writer opens the FIFO
    std::thread reader([&] { got = slurp(w.p("pipe.tfrecord")); });
    const auto r = w.prepare(w.p("pipe.tfrecord"));
    reader.join();
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(got, want);
    EXPECT_TRUE(is_kind(w.p("pipe.tfrecord"), S_IFIFO));
    // Standard output, as a shell's pipe (/dev/stdout is a link to the pipe).
    const auto piped = run_shell(bertbench_path() + " prepare --input_file=" + w.p("c.txt") +
                                 " --output_file=/dev/stdout --vocab_file=" + golden("vocab.txt") +
                                 " --dupe_factor=1 2>/dev/null | cat > " + w.p("via_stdout"));
    ASSERT_EQ(piped.exit_code, 0) << piped.out;
    EXPECT_EQ(slurp(w.p("via_stdout")), want);
    // A character device of our own (/dev/null's numbers), where this user may make one.
    if (::mknod(w.p("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        const auto d = w.prepare(w.p("null"));
        EXPECT_EQ(d.exit_code, 0) << d.out;
        EXPECT_TRUE(is_kind(w.p("null"), S_IFCHR));
    }
    // HDF5 needs seeks: a FIFO is refused in one line, before any work.
    const auto h = w.prepare(w.p("pipe.tfrecord"), "--output_format=hdf5");
    EXPECT_EQ(h.exit_code, 1);
    ::symlink("pipe.tfrecord", w.p("pipe.hdf5").c_str());
    const auto h5 = w.prepare(w.p("pipe.hdf5"), "--output_format=hdf5");
    EXPECT_EQ(h5.exit_code, 1);
    EXPECT_NE(h5.out.find("not a regular file (an HDF5 file is written with seeks), expected one"),
              std::string::npos)
        << h5.out;
    EXPECT_TRUE(is_kind(w.p("pipe.tfrecord"), S_IFIFO));
    EXPECT_TRUE(matching_files(w.dir.string(), R"(.*\.tmp\.\d+)").empty());
}

// A run stopped by a signal while it writes leaves neither its output nor its temporary.
TEST(OutputKindsCli, SignalsRemoveTheTemporaries) {
    OutDir w("signal");
    {
        const std::string corpus = slurp(golden("corpus_public.txt"));
        std::ofstream big(w.p("big.txt"));
        for (int i = 0; i < 8; ++i) big << corpus << "\n";
    }
    for (const int sig : {SIGTERM, SIGHUP}) {
        const std::string out = w.p("big.tfrecord");
        const std::string bb = bertbench_path(), in = "--input_file=" + w.p("big.txt"),
                          of = "--output_file=" + out,
                          vocab = "--vocab_file=" + golden("vocab.txt");
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            const int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 2);
            ::signal(sig, SIG_DFL);
            ::execl(bb.c_str(), bb.c_str(), "prepare", in.c_str(), of.c_str(), vocab.c_str(),
                    "--dupe_factor=20", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // Wait for the temporary to hold bytes (the writing has begun), then stop the run.
        const std::string tmp = out + ".tmp." + std::to_string(pid);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        std::error_code ec;
        const auto has_bytes = [&] {
            const uintmax_t n = fs::file_size(tmp, ec);
            return !ec && n > 0;
        };
        while (!has_bytes() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling, not a wait
        const bool seen = fs::exists(tmp, ec);
        ::kill(pid, sig);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(seen) << "the run wrote no temporary " << tmp;
        ASSERT_TRUE(WIFSIGNALED(status))
            << "status " << status << " (the run ended before the signal)";
        EXPECT_EQ(WTERMSIG(status), sig);
        EXPECT_FALSE(fs::exists(tmp, ec)) << tmp;
        EXPECT_FALSE(fs::exists(out, ec)) << out;
    }
}

TEST(OutputKindsCli, FullDiskUnderHdf5IsAnErrorNotACrash) {
    OutDir w("fsize");
    // A 5-block file size limit, its signal ignored: writes past it fail (EFBIG) as on a full disk
    const auto r =
        run_shell("ulimit -f 5; trap '' XFSZ; " + bertbench_path() + " prepare --input_file=" +
                  golden("corpus_public.txt") + " --output_file=" + w.p("s.hdf5") +
                  " --output_format=hdf5 --vocab_file=" + golden("vocab.txt") + " --dupe_factor=1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: " + w.p("s.hdf5") + ": "), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(w.p("s.hdf5")));
    EXPECT_TRUE(matching_files(w.dir.string(), R"(.*\.tmp\.\d+)").empty());
}

TEST(OutputKindsCli, AnUnwritableLogOrOutputFileFailsBeforeTheWork) {
    OutDir w("log");
    for (const std::string& log : {w.p("nodir/x.log"), w.dir.string()}) {
        const auto r = w.prepare(w.p("o.tfrecord"), "--log_file=" + log);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("error: --log_file=" + log + ": "), std::string::npos) << r.out;
        EXPECT_FALSE(fs::exists(w.p("o.tfrecord")));
    }
    // An output in a missing directory: said before the corpus is read (it used to be after the
    // instances were made, without the flag's name), in the one line
    const auto r = w.prepare(w.p("o.tfrecord") + "," + w.p("nodir/o2.tfrecord"));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("error: --output_file=" + w.p("nodir/o2.tfrecord") + ": its directory " +
                         w.p("nodir") + " does not exist"), std::string::npos) << r.out;
    EXPECT_EQ(testing::count_of(r.out, "\n"), 1u) << r.out;
    EXPECT_FALSE(fs::exists(w.p("o.tfrecord")));
    // The same through a dangling link whose file would be made in a missing directory
    fs::create_symlink("nodir/made.tfrecord", w.p("dangling.tfrecord"));
    const auto d = w.prepare(w.p("o.tfrecord") + "," + w.p("dangling.tfrecord"));
    EXPECT_EQ(d.exit_code, 1) << d.out;
    EXPECT_NE(d.out.find("error: --output_file=" + w.p("dangling.tfrecord") + " (a symbolic link to " +
                         w.p("nodir/made.tfrecord") + "): its directory " + w.p("nodir") + " does not exist"),
              std::string::npos) << d.out;
    EXPECT_EQ(testing::count_of(d.out, "\n"), 1u) << d.out;
    EXPECT_FALSE(fs::exists(w.p("o.tfrecord")));
    // A log that fails at the end (a full device): the outputs written before it go again
    const auto full = w.prepare(w.p("o.tfrecord"), "--log_file=/dev/full");
    EXPECT_EQ(full.exit_code, 1) << full.out;
    EXPECT_NE(full.out.find("error: /dev/full: write failed"), std::string::npos) << full.out;
    EXPECT_FALSE(fs::exists(w.p("o.tfrecord")));
}

TEST(OutputKindsCli, IntegersAsAbslReadsThem) {
    OutDir w("seed");
    ASSERT_EQ(w.prepare(w.p("a.tfrecord"), "--random_seed=16 --max_seq_length=32").exit_code, 0);
    ASSERT_EQ(w.prepare(w.p("b.tfrecord"), "--random_seed=0x10 --max_seq_length=0_0_3_2").exit_code,
              0);
    EXPECT_EQ(slurp(w.p("a.tfrecord")), slurp(w.p("b.tfrecord")));
    // absl reads a signed text in base 10
    const auto bad = w.prepare(w.p("c.tfrecord"), "--random_seed=-0x10");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.out.find("--random_seed: expected an integer, got \"-0x10\""), std::string::npos)
        << bad.out;
}

TEST(OutputKindsCli, SkippedCorruptRecordsAreSaid) {
    OutDir w("corrupt");
    std::string d = slurp(golden("pretraining/public_128_s12345_d2.tfrecord"));
    size_t at = 0;
    for (int i = 0; i < 3; ++i) {  // record 3's payload
        uint64_t n = 0;
        std::memcpy(&n, d.data() + at, 8);
        at += 16 + n;
    }
    d[at + 12 + 5] ^= static_cast<char>(0xff);
    std::ofstream(w.p("bad.tfrecord"), std::ios::binary) << d;
    const auto r =
        run_bertbench("pick-eval --input_tfrecord=" + w.p("bad.tfrecord") +
                      " --output_tfrecord=" + w.p("pick.tfrecord") +
                      " --num_examples_to_pick=10 --max_seq_length=128 --max_predictions_per_seq=20"
                      " --skip_corrupt_records");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // once, although pick-eval reads the file twice (a counting pass, then the picking one)
    EXPECT_EQ(count_of(r.out, w.p("bad.tfrecord") + ": record 3 at byte " + std::to_string(at) +
                                  ": data CRC mismatch; skipped (--skip_corrupt_records)"),
              1u)
        << r.out;
    // Its output is a TFRecord: a name readers would take for HDF5 is refused before any work.
    const auto h5 = run_bertbench("pick-eval --input_tfrecord=" + golden("pretraining/public_128_s12345_d2.tfrecord") +
                                  " --output_tfrecord=" + w.p("pick.H5") +
                                  " --num_examples_to_pick=10 --max_seq_length=128 --max_predictions_per_seq=20");
    EXPECT_EQ(h5.exit_code, 1) << h5.out;
    EXPECT_NE(h5.out.find("error: --output_tfrecord=" + w.p("pick.H5") + ": expected a name not ending in .hdf5 or .h5"),
              std::string::npos) << h5.out;
    EXPECT_FALSE(fs::exists(w.p("pick.H5")));
}

}  // namespace
}  // namespace bertbench
