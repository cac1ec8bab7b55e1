// A backend's own collectives (backend.hpp, Backend::collectives): the CPU backend has none and
// says so; the CUDA backend's are NCCL's, exercised here as far as one GPU allows — a communicator
// of one rank, whose all-reduce (in order, and overlapped: start_sum, wait_started) must leave the
// buffer's bits as they were. Where NCCL cannot be
// loaded the CUDA case skips naming why, unless BB_EXPECT_NCCL=1 (scripts/gpu-check.sh) makes that
// a failure. Several ranks: tests/dist/data_parallel_test.cpp (on a test backend's collectives).
#include <cstdlib>
#include <cstring>

#include "backend_ops_util.hpp"

namespace bertbench::backend {
namespace {

INSTANTIATE_TEST_SUITE_P(All, BackendCollectives, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(BackendCollectives, OneRankSumLeavesTheBuffer) {
    std::string why;
    const std::vector<std::byte> id = be().collectives_id(why);
    if (GetParam() == "cpu") {
        EXPECT_TRUE(id.empty());
        EXPECT_EQ(why, "the cpu backend has no collectives of its own");
        EXPECT_THROW(be().collectives({}, 0, 1), Error);
        return;
    }
    if (id.empty()) {
        const char* expect = std::getenv("BB_EXPECT_NCCL");
        if (expect && std::string(expect) == "1") FAIL() << "BB_EXPECT_NCCL=1 but: " << why;
        GTEST_SKIP() << why;
    }
    EXPECT_THROW(be().collectives(std::span<const std::byte>(id).first(id.size() - 1), 0, 1), Error);
    std::unique_ptr<Collectives> c = be().collectives(id, 0, 1);
    std::cout << "[backend " << be().name() << "] " << c->describe() << "\n";
    EXPECT_EQ(c->describe().rfind("NCCL ", 0), 0u) << c->describe();
    for (const size_t n : {size_t{1}, size_t{1003}, size_t{1} << 20}) {
        std::vector<float> x = rand_f(n, 51 + n, 1e3);
        x[0] = -0.f;
        const auto buf = put(x);
        c->all_reduce_sum(buf->get(), n);
        const std::vector<float> got = buf->download();
        EXPECT_EQ(std::memcmp(got.data(), x.data(), n * sizeof(float)), 0) << "n=" << n;
    }
    // The overlapped form, as data parallelism uses it: two buckets started behind the backend's
    // queued work, then waited for before more of it; the backend's two doublings around them
    // (exact) must both land, and the sums between them. With one rank a sum changes no value, but
    // it writes the buffer: on a GPU, and on the emulated one, whose streams run as late as their
    // waits allow, a sum that does not wait for the first doubling writes back the undoubled value,
    // and one not waited for before the second doubling lands after it (seen once the
    // communicator's stream has finished: after the communicator is gone).
    std::vector<std::vector<float>> xs;
    std::vector<std::unique_ptr<Buffer<float>>> bufs;
    const auto four_times = [&](size_t i) {
        const std::vector<float> got = bufs[i]->download();
        size_t bad = 0;
        for (size_t j = 0; j < got.size(); ++j) bad += got[j] != 4.f * xs[i][j];
        return bad;
    };
    for (const size_t n : {size_t{2}, size_t{1} << 20}) {
        xs.push_back(rand_f(n, 52 + n, 1e3));
        bufs.push_back(put(xs.back()));
        float* p = bufs.back()->get();
        BB_OP(be(), scale_values)(p, n, 2.f, nullptr);
        c->start_sum(p + n / 2, n - n / 2);
        c->start_sum(p, n / 2);
        c->wait_started();
        BB_OP(be(), scale_values)(p, n, 2.f, nullptr);
        EXPECT_EQ(four_times(bufs.size() - 1), 0u) << "n=" << n;
    }
    c.reset();
    for (size_t i = 0; i < bufs.size(); ++i)
        EXPECT_EQ(four_times(i), 0u) << "after the communicator, n=" << xs[i].size();
}

}  // namespace
}  // namespace bertbench::backend
