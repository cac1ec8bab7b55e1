// HDF5 shards built to hurt (issue 28 items 1 and 3), made in the test with h5py (python3-h5py),
// read through io::Hdf5ShardReader and data::ShardSource in a child process: each must end in one
// Error naming the file and dataset, what was expected and what was found, with the child's peak
// memory (ru_maxrss) far below what the file declares. A virtual dataset sourced from itself used
// to overflow the stack inside libhdf5 (SIGSEGV); 10^7 never-written rows, a chunk of 2^21 rows
// and a deflate stream inflating a 1 MiB chunk to 512 MiB each cost what the file declared; a
// chunk stored shorter than its shape was read past its buffer.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/hdf5_lib.hpp"
#include "io/hdf5_shard.hpp"
#include "test_util.hpp"

namespace bertbench::io {
namespace {

using bertbench::testing::error_of;
using bertbench::testing::kAddressSanitizer;
using bertbench::testing::TmpDir;

// Writes the hostile files. argv: kind, path. T = 128, P = 20 (the MLPerf phase-1 widths), 4 rows
// of one valid record unless the kind says otherwise.
constexpr const char* kGenerator = R"PY(
import sys, zlib, h5py, numpy as np
T, P = 128, 20
def arrays(n):
    ids = np.zeros((n, T), np.int32); ids[:, :4] = [101, 7, 8, 102]
    mask = np.zeros((n, T), np.int8); mask[:, :4] = 1
    pos = np.zeros((n, P), np.int32); pos[:, 0] = 1
    mid = np.zeros((n, P), np.int32); mid[:, 0] = 7
    return dict(input_ids=ids, input_mask=mask, segment_ids=np.zeros((n, T), np.int8),
                masked_lm_positions=pos, masked_lm_ids=mid,
                next_sentence_labels=np.zeros((n,), np.int8))
kind, path = sys.argv[1], sys.argv[2]
a = arrays(4)
with h5py.File(path, 'w') as f:
    for k, v in a.items():
        if k == 'input_ids' and kind != 'good':
            continue
        f.create_dataset(k, data=v, compression='gzip' if kind == 'good' else None)
    if kind == 'virtual_self':  # input_ids mapped from input_ids of this very file
        lay = h5py.VirtualLayout(shape=(4, T), dtype='i4')
        lay[:] = h5py.VirtualSource(path, 'input_ids', shape=(4, T))
        f.create_virtual_dataset('input_ids', lay)
    elif kind == 'external':
        open(path + '.raw', 'wb').write(a['input_ids'].tobytes())
        f.create_dataset('input_ids', shape=(4, T), dtype='i4',
                         external=[(path + '.raw', 0, 4 * T * 4)])
    elif kind == 'extlink':  # input_ids in another file, reached through an external link
        with h5py.File(path + '.target', 'w') as g:
            g.create_dataset('input_ids', data=a['input_ids'])
        f['input_ids'] = h5py.ExternalLink(path + '.target', 'input_ids')
    elif kind == 'unwritten':  # 10^7 rows declared, none written (h5py allocates chunks late)
        for k, v in a.items():
            if k in f:
                del f[k]
            f.create_dataset(k, shape=(10**7,) + v.shape[1:], dtype=v.dtype,
                             chunks=(1024,) + v.shape[1:], compression='gzip')
    elif kind == 'bigchunk':  # 4 rows in one chunk of 2^17 rows (64 MiB)
        f.create_dataset('input_ids', data=a['input_ids'], maxshape=(None, T),
                         chunks=(2**17, T), compression='gzip')
    elif kind == 'bomb':  # a 1 MiB chunk whose deflate stream inflates to 512 MiB
        d = f.create_dataset('input_ids', shape=(4, T), maxshape=(None, T), dtype='i4',
                             chunks=(2048, T), compression='gzip')
        c = zlib.compressobj(9)
        d.id.write_direct_chunk((0, 0), c.compress(bytes(512 << 20)) + c.flush())
    elif kind == 'filter':  # filter 307 (bzip2, a plugin), applied to the one chunk
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((4, T))
        dcpl.set_filter(307, h5py.h5z.FLAG_OPTIONAL, ())
        ds = h5py.h5d.create(f.id, b'input_ids', h5py.h5t.STD_I32LE,
                             h5py.h5s.create_simple((4, T)), dcpl=dcpl)
        ds.write_direct_chunk((0, 0), a['input_ids'].tobytes(), filter_mask=0)
    elif kind == 'manychunks':  # 2^32 rows in 1-row chunks, a fixed-array index, one written
        f.close()
        with h5py.File(path, 'w', libver='latest') as g:
            for k, v in a.items():
                d = g.create_dataset(k, shape=(2**32,) + v.shape[1:], dtype=v.dtype,
                                     chunks=(1,) + v.shape[1:])
                d[0] = v[0]
    elif kind in ('short', 'shortshuffle', 'shortdeflate', 'nosum'):  # one chunk of 4 rows
        d = f.create_dataset('input_ids', shape=(4, T), dtype='i4', chunks=(4, T),
                             shuffle=kind == 'shortshuffle', fletcher32=kind == 'nosum',
                             compression='gzip' if kind == 'shortdeflate' else None)
        raw = {'short': bytes(17), 'shortshuffle': bytes(17), 'nosum': a['input_ids'].tobytes(),
               'shortdeflate': zlib.compress(bytes(100))}[kind]
        d.id.write_direct_chunk((0, 0), raw)
    elif kind == 'precision16':  # input_ids' int32 with 16 significant bits (a damaged type message)
        t = h5py.h5t.STD_I32LE.copy()
        t.set_precision(16)
        ds = h5py.h5d.create(f.id, b'input_ids', t, h5py.h5s.create_simple((4, T)))
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, a['input_ids'])
    elif kind == 'userblock':  # the good file behind a 512-byte user block: addresses from its base
        f.close()
        with h5py.File(path, 'w', userblock_size=512) as g:
            for k, v in a.items():
                g.create_dataset(k, data=v, compression='gzip')
    elif kind != 'good':
        raise SystemExit('unknown kind ' + kind)
)PY";

std::string make_hostile(const TmpDir& dir, const std::string& kind) {
    const std::string script = dir.file("gen.py"), path = dir.file(kind + ".h5");
    if (!std::filesystem::exists(script)) write_file_atomic(script, kGenerator);
    const std::string cmd = "/usr/bin/python3 '" + script + "' " + kind + " '" + path + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0)
        << cmd << " (python3-h5py installed? scripts/setup.sh)";
    return path;
}

using bertbench::testing::ChildOutcome;
// A crash or a blow-up must fail the test, not kill it: a child with a 60 s alarm.
ChildOutcome in_child(const std::function<void()>& f) { return bertbench::testing::run_in_child(f, 60); }

long self_rss_kb() {
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

// Opening and reading the whole shard must end in one Error naming `path`, containing `parts`,
// with the child's peak memory at most `rss_mb` MiB above this process's.
void expect_refused(const std::string& path, const std::vector<std::string>& parts,
                    long rss_mb = 200) {
    const long base = self_rss_kb();
    const ChildOutcome o = in_child([&] { read_hdf5_shard(path, 128, 20); });
    SCOPED_TRACE(path);
    EXPECT_EQ(o.status, 0) << o.message;
    EXPECT_NE(o.message.find(path), std::string::npos) << o.message;
    for (const auto& p : parts) EXPECT_NE(o.message.find(p), std::string::npos) << o.message;
    EXPECT_EQ(o.message.find('\n'), std::string::npos) << o.message;
    EXPECT_LT(o.max_rss_kb - base, rss_mb * 1024) << "peak " << o.max_rss_kb << " KB, " << o.message;
}

TEST(HostileHdf5, GoodFileReadsInBlocksAsWhole) {
    TmpDir dir("bb_hostile_hdf5");
    const std::string path = make_hostile(dir, "good");
    const Hdf5ShardArrays all = read_hdf5_shard(path, 128, 20);
    ASSERT_EQ(all.records, 4u);
    const Hdf5ShardReader r(path, 128, 20);
    EXPECT_EQ(r.block_rows(), kHdf5BlockBytes / (6 * 128 + 8 * 20 + 1));
    const Hdf5ShardArrays tail = r.read_rows(1, 3);
    ASSERT_EQ(tail.records, 3u);
    EXPECT_TRUE(std::equal(tail.input_ids.begin(), tail.input_ids.end(), all.input_ids.begin() + 128));
    EXPECT_EQ(tail.masked_lm_ids, std::vector<int32_t>(all.masked_lm_ids.begin() + 20, all.masked_lm_ids.end()));
    EXPECT_NE(error_of([&] { r.read_rows(2, 3); }).find("expected rows within the shard's 4"),
              std::string::npos);
    EXPECT_EQ(verify_hdf5_shard(path, 128, 20), 4u);
}

// A shard that inflates far beyond its file (60,000 records of zeros: 56 MB of values, a few
// hundred KB of gzip) is verified a block at a time: the checking process's peak memory stays
// near one block (8 MiB), where reading it whole takes all 56 MB.
TEST(HostileHdf5, VerifyingAShardKeepsOneBlockInMemory) {
    TmpDir dir("bb_hostile_hdf5");
    const std::string path = dir.file("zeros.h5");
    // written by a child, so that this process's peak memory stays below what is measured
    const ChildOutcome written = in_child([&] {
        Hdf5ShardArrays a;
        a.records = 60000;
        a.max_seq_length = 128;
        a.max_predictions_per_seq = 20;
        a.input_ids.assign(a.records * 128, 0);
        a.input_mask.assign(a.records * 128, 0);
        a.segment_ids.assign(a.records * 128, 0);
        a.masked_lm_positions.assign(a.records * 20, 0);
        a.masked_lm_ids = a.masked_lm_positions;
        a.next_sentence_labels.assign(a.records, 0);
        write_hdf5_shard(path, a);
    });
    ASSERT_EQ(written.status, 1) << written.message;
    // what a forked child's peak is when it does nothing: not always this process's resident size
    // (after a long test run the two differed by 8 MB), so measured the same way as the others
    const long base = in_child([] {}).max_rss_kb;
    const ChildOutcome v = in_child([&] {
        if (verify_hdf5_shard(path, 128, 20) != 60000) fail("wrong record count");
    });
    EXPECT_EQ(v.status, 1) << v.message;  // returned without an error
    if (kAddressSanitizer)
        GTEST_SKIP() << "memory not judged: AddressSanitizer keeps freed blocks resident (its quarantine)";
    const ChildOutcome w = in_child([&] { (void)read_hdf5_shard(path, 128, 20); });
    std::printf("[hdf5] peak above this process: verifying %ld KB, reading whole %ld KB\n", v.max_rss_kb - base,
                w.max_rss_kb - base);
    EXPECT_LT(v.max_rss_kb - base, 24 * 1024);
    EXPECT_GT(w.max_rss_kb - base, 40 * 1024) << "the whole read should hold the 56 MB";
}

// A virtual dataset (here sourced from itself: libhdf5 recursed until SIGSEGV), external storage
// and an external link (the storage checks measured the other file's offsets against this file's
// size: refused as truncated, or read, by the link file's length; found by QA) are refused when
// the shard is opened, before any value is read.
TEST(HostileHdf5, VirtualAndExternalDatasetsAreRefusedBeforeAnyRead) {
    TmpDir dir("bb_hostile_hdf5");
    expect_refused(make_hostile(dir, "extlink"),
                   {"dataset input_ids: expected its values in this file, got a link to another file"});
    expect_refused(make_hostile(dir, "virtual_self"),
                   {"dataset input_ids: expected values stored in the file", "got a virtual dataset"});
    expect_refused(make_hostile(dir, "external"),
                   {"dataset input_ids: expected values stored in the file",
                    "got external storage in 1 other file(s)"});
}

// An integer type with fewer significant bits than its size (one damaged byte of a type message
// does it): libhdf5 read such values as zeros or cut short, with no error; refused on open.
TEST(HostileHdf5, IntegersWithoutAllTheirBitsAreRefused) {
    TmpDir dir("bb_hostile_hdf5");
    expect_refused(make_hostile(dir, "precision16"),
                   {"dataset input_ids: an integer of 16 significant bits at bit 0 of int32, expected all 32 bits"});
}

// libhdf5 1.10 faults on some damaged files (an address beyond the file's end, followed unchecked;
// h5py crashes on them too): a SIGSEGV of the reading thread under the guard ends the process with
// one line naming the file and exit status 1; without the guard the handler is what it was.
TEST(HostileHdf5, ACrashInsideLibhdf5IsOneLineNamingTheFile) {
    struct sigaction before {};
    ASSERT_EQ(::sigaction(SIGSEGV, nullptr, &before), 0);
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(fds[1], STDERR_FILENO);
        ::alarm(60);
        h5::Hdf5Lock lock;
        const h5::Hdf5CrashGuard guard("damaged.h5");
        ::raise(SIGSEGV);
        ::_exit(0);  // not reached
    }
    ::close(fds[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
    EXPECT_EQ(out, "bertbench: error: [hdf5] damaged.h5: libhdf5 crashed reading it (a damaged file?)\n");
    {
        h5::Hdf5Lock lock;
        const h5::Hdf5CrashGuard guard("x.h5");
    }
    struct sigaction after {};
    ASSERT_EQ(::sigaction(SIGSEGV, nullptr, &after), 0);
    EXPECT_EQ(after.sa_handler, before.sa_handler);
}

// A deflated chunk is read from where the chunk index says, by its size there (H5Dread_chunk sized
// its copy by another lookup: one flipped bit of a golden shard's index, byte 3392, overflowed the
// buffer and the process aborted in malloc); addresses count from the file's base, after a user block.
TEST(HostileHdf5, ChunksAreReadWhereTheIndexSaysAndNoFurther) {
    TmpDir dir("bb_hostile_hdf5");
    const Hdf5ShardArrays plain = read_hdf5_shard(make_hostile(dir, "good"), 128, 20);
    const Hdf5ShardArrays behind = read_hdf5_shard(make_hostile(dir, "userblock"), 128, 20);
    EXPECT_EQ(behind.input_ids, plain.input_ids);
    EXPECT_EQ(behind.masked_lm_ids, plain.masked_lm_ids);
    std::string bytes = read_file(bertbench::testing::golden("hdf5/public_128_s12345_d2.hdf5"));
    ASSERT_GT(bytes.size(), 3392u);
    bytes[3392] = static_cast<char>(bytes[3392] ^ 0x10);
    const std::string damaged = dir.file("damaged_index.hdf5");
    write_file_atomic(damaged, bytes);
    const ChildOutcome o = in_child([&] { read_hdf5_shard(damaged, 128, 20); });
    EXPECT_EQ(o.status, 0) << o.message;  // an Error, not a crash
    EXPECT_NE(o.message.find(damaged + ": dataset input_ids"), std::string::npos) << o.message;
}

// A damaged key in the chunk index (version-1 B-tree): listing the entries still finds every
// chunk, but a read's search of the keys misses one and used to fill its rows with zeros,
// silently (the eval loss moved by 4e-6). Key k of the input_ids index's leaf (the first "TREE"
// node of raw-data chunks: 24-byte header, then 32-byte keys and 8-byte child addresses) gets a
// nonzero last coordinate, which is 0 in every key of a valid file.
TEST(HostileHdf5, AChunkThatTheIndexSearchCannotFindIsRefused) {
    TmpDir dir("bb_hostile_hdf5");
    std::string bytes = read_file(bertbench::testing::golden("hdf5/public_128_s12345_d2.hdf5"));
    size_t node = 0;
    while ((node = bytes.find("TREE", node)) != std::string::npos && bytes[node + 4] != 1) node += 4;
    ASSERT_NE(node, std::string::npos);
    const int entries = static_cast<unsigned char>(bytes[node + 6]) | static_cast<unsigned char>(bytes[node + 7]) << 8;
    ASSERT_GE(entries, 4);
    const size_t key = node + 24 + static_cast<size_t>(entries / 2) * 40;
    ASSERT_EQ(bytes[key + 24], 0);
    bytes[key + 24] = 64;
    const std::string damaged = dir.file("damaged_key.hdf5");
    write_file_atomic(damaged, bytes);
    expect_refused(damaged, {"dataset input_ids: expected the chunk index to lead to the chunk at (",
                             "a search does not find it"});
}

// 10^7 rows declared in a 3 KB file, none written: refused on open (it used to allocate 9 GB
// before failing, or fail against physical memory), at constant memory.
TEST(HostileHdf5, NeverWrittenRowsAreRefusedAtConstantMemory) {
    TmpDir dir("bb_hostile_hdf5");
    const std::string path = make_hostile(dir, "unwritten");
    EXPECT_LT(std::filesystem::file_size(path), 100'000u);
    expect_refused(path, {"dataset input_ids: expected all 9766 chunks of its (10000000, 128) "
                          "extent written, got ",
                          "never written"},
                   64);
}

// Found by the hdf5_gen generator: 2^40 declared rows in one-row chunks, with libhdf5's newest
// format (a fixed-array chunk index): libhdf5 walks every declared index entry to count the
// written chunks, which took minutes; the file is a few KB of data in an 8.8 TB sparse file (the
// index's reserved address space). Here 2^32 rows in each of the six datasets (200 GB sparse,
// 3 MB written). Now refused by the bytes the file holds before libhdf5 is
// asked, at once.
TEST(HostileHdf5, DeclaredChunkCountIsBoundedByTheFileBeforeLibhdf5CountsThem) {
    TmpDir dir("bb_hostile_hdf5");
    const auto t0 = std::chrono::steady_clock::now();
    expect_refused(make_hostile(dir, "manychunks"),
                   {"dataset input_ids: expected all 4294967296 chunks of its (4294967296, 128) "
                    "extent written, got a file holding ",
                    "bytes, too few for them"},
                   64);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

// One chunk of 2^17 rows (64 MiB at T = 128) holding 4 rows: refused by its chunk size (a chunk
// of 2^21 rows used to be read with 1.1 GB and exit 0).
TEST(HostileHdf5, OversizedChunkIsRefusedAtConstantMemory) {
    TmpDir dir("bb_hostile_hdf5");
    expect_refused(make_hostile(dir, "bigchunk"),
                   {"dataset input_ids: expected chunks of at most 16 MiB",
                    "got chunk shape (131072, 128) of 67108864 bytes"},
                   64);
}

// A 1 MiB chunk whose stored deflate stream (0.5 MB) inflates to 512 MiB: libhdf5's filter grew
// its buffer to the stream's end; ours stops at the chunk's size.
TEST(HostileHdf5, DeflateBombStopsAtTheChunkSize) {
    TmpDir dir("bb_hostile_hdf5");
    expect_refused(make_hostile(dir, "bomb"),
                   {"dataset input_ids: expected a chunk inflating to at most its 1048576 bytes",
                    "got a 521832-byte deflate stream yielding more"},
                   100);
}

// A filter that libhdf5 would look for as a plugin: named before any read (it used to surface as
// "can't open directory .../plugins ... the file is corrupt or truncated").
TEST(HostileHdf5, UnsupportedFilterIsNamed) {
    TmpDir dir("bb_hostile_hdf5");
    const std::string path = make_hostile(dir, "filter");
    expect_refused(path, {"dataset input_ids: expected no filter or gzip/deflate, shuffle, "
                          "fletcher32",
                          "got filter 307"});
    const std::string msg = error_of([&] { Hdf5ShardReader r(path, 128, 20); });
    EXPECT_EQ(msg.find("plugins ("), std::string::npos) << msg;
    EXPECT_EQ(msg.find("corrupt"), std::string::npos) << msg;
}

// Found by the hdf5_gen generator: a chunk stored shorter than its chunk shape (written directly,
// or deflating to fewer bytes) made libhdf5 copy a whole chunk out of the shorter buffer, a heap
// over-read under ASan. Every chunk a block touches is now checked before libhdf5 reads it:
// stored as its bytes (plus fletcher32's 4), or inflating to exactly them.
TEST(HostileHdf5, ChunksThatDoNotHoldTheirShapeAreRefusedBeforeLibhdf5ReadsThem) {
    TmpDir dir("bb_hostile_hdf5");
    for (const char* kind : {"short", "shortshuffle"})
        expect_refused(make_hostile(dir, kind),
                       {"dataset input_ids: expected the chunk at (0, 0) stored as its 2048 bytes, "
                        "got 17 bytes"});
    expect_refused(make_hostile(dir, "nosum"),
                   {"dataset input_ids: expected the chunk at (0, 0) stored as its 2048 bytes "
                    "plus a 4-byte checksum, got 2048 bytes"});
    expect_refused(make_hostile(dir, "shortdeflate"),
                   {"dataset input_ids: expected the chunk at (0, 0) to inflate to its 2048 "
                    "bytes, got 100"});
}

}  // namespace
}  // namespace bertbench::io
