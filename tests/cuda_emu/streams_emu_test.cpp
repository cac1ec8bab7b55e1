// The emulated GPU's streams and memory (tests/cuda_emu/shim/cuda_runtime.h): queues that run as
// late as CUDA allows, so that work ordered only by a missing cudaStreamWaitEvent reads stale values
// in the emulated tests instead of passing, and device memory that the host may not touch outside
// device work. These pin that behaviour; the backend's own use of two streams is checked by
// BackendCollectives (one rank) and DataParallelOnTheEmulatedGpu (two).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

namespace {

__global__ void k_fill(float* p, float v, int n) {
    const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) p[i] = v;
}

class EmulatedStreams : public ::testing::Test {
protected:
    static constexpr int n = 100;
    void SetUp() override {
        ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
        ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
        ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), bytes), cudaSuccess);
        ASSERT_EQ(cudaMemsetAsync(x, 0, bytes, a), cudaSuccess);
        ASSERT_EQ(cudaMemsetAsync(y, 0, bytes, a), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    }
    void TearDown() override {
        cudaFree(x);
        cudaFree(y);
        cudaEventDestroy(e);
        cudaStreamDestroy(a);
        cudaStreamDestroy(b);
    }
    std::vector<float> host(const float* d, cudaStream_t st) {
        std::vector<float> h(n);
        EXPECT_EQ(cudaMemcpyAsync(h.data(), d, bytes, cudaMemcpyDeviceToHost, st), cudaSuccess);
        return h;
    }
    void fill(float* d, float v, cudaStream_t st) { emu_launch(k_fill, 1, 128, 0, st, d, v, n); }
    static constexpr size_t bytes = n * sizeof(float);
    cudaStream_t a = nullptr, b = nullptr;
    cudaEvent_t e = nullptr;
    float* x = nullptr;
    float* y = nullptr;
};

TEST_F(EmulatedStreams, WorkRunsWhenTheHostWaitsForIt) {
    fill(x, 1.f, a);
    ASSERT_EQ(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, b), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    EXPECT_EQ(host(y, b), std::vector<float>(n, 0.f)) << "a launch ran before its stream was waited for";
    EXPECT_EQ(host(x, a), std::vector<float>(n, 1.f)) << "a copy to the host waits for its stream";
}

TEST_F(EmulatedStreams, AnotherStreamSeesTheWorkOnlyAfterWaitingForAnEventRecordedAfterIt) {
    fill(x, 1.f, a);
    ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    fill(x, 2.f, a);
    ASSERT_EQ(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, b), cudaSuccess);  // no wait
    EXPECT_EQ(host(y, b), std::vector<float>(n, 1.f));
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    fill(x, 3.f, a);  // after the event: not waited for
    ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, b), cudaSuccess);
    EXPECT_EQ(host(y, b), std::vector<float>(n, 2.f));
    EXPECT_EQ(host(x, a), std::vector<float>(n, 3.f));
}

TEST_F(EmulatedStreams, ACopyFromTheHostTakesTheSourceAtTheCall) {
    std::vector<float> h(n, 5.f);
    ASSERT_EQ(cudaMemcpyAsync(x, h.data(), bytes, cudaMemcpyHostToDevice, a), cudaSuccess);
    h.assign(n, 6.f);
    EXPECT_EQ(host(x, a), std::vector<float>(n, 5.f));
}

TEST_F(EmulatedStreams, ElapsedTimeNeedsBothEventsRecordedAndReached) {
    cudaEvent_t later = nullptr;
    ASSERT_EQ(cudaEventCreate(&later), cudaSuccess);
    float ms = -1.f;
    EXPECT_EQ(cudaEventElapsedTime(&ms, e, later), cudaErrorInvalidResourceHandle);
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    fill(x, 1.f, a);
    ASSERT_EQ(cudaEventRecord(later, a), cudaSuccess);
    EXPECT_EQ(cudaEventElapsedTime(&ms, e, later), cudaErrorNotReady);
    ASSERT_EQ(cudaEventSynchronize(later), cudaSuccess);
    EXPECT_EQ(cudaEventElapsedTime(&ms, e, later), cudaSuccess);
    EXPECT_GE(ms, 0.f);
    cudaEventDestroy(later);
}

TEST_F(EmulatedStreams, DestroyingAStreamFinishesItsWork) {
    fill(x, 4.f, a);
    ASSERT_EQ(cudaStreamDestroy(a), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(host(x, b), std::vector<float>(n, 4.f));
}

TEST_F(EmulatedStreams, NewMemoryIsGarbageAndTheHostMayNotTouchIt) {
    float* z = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&z), bytes), cudaSuccess);
    const std::vector<float> got = host(z, a);
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[n - 1])) << got[0];
#if defined(__SANITIZE_ADDRESS__)
    cudaFree(z);
    GTEST_SKIP() << "with AddressSanitizer device memory is unguarded heap memory";
#else
    EXPECT_DEATH({ volatile float v = z[3]; (void)v; }, "the host touched device memory \\(byte 12 of an allocation of");
    cudaFree(z);
#endif
}

}  // namespace
