// NCCL through dlopen("libnccl.so.2") (nccl.hpp); its types from the toolkit's nccl.h. Only the
// calls data parallelism needs: a communicator per process from rank 0's unique id, in-place
// float sums on the backend's stream, or overlapped with it on a stream of their own (start_sum:
// the communication stream waits for an event recorded on the backend's stream, so the bucket's
// gradients are final; wait_started: the backend's stream waits for one recorded on the
// communication stream after the last started sum).
#include "backend/cuda/nccl.hpp"

#include <dlfcn.h>

#include <cstring>
#include <type_traits>

#include "core/error.hpp"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define BB_HAVE_NCCL_H 1
#endif

// The emulated GPU's tests name their own library (tests/cuda_emu/shim/nccl_emu.cpp).
#ifndef BB_NCCL_LIBRARY
#define BB_NCCL_LIBRARY "libnccl.so.2"
#endif

namespace bertbench::backend::cuda {

#ifdef BB_HAVE_NCCL_H
namespace {

struct Nccl {
    decltype(&ncclGetVersion) get_version = nullptr;
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) init_rank = nullptr;
    decltype(&ncclAllReduce) all_reduce = nullptr;
    decltype(&ncclCommDestroy) destroy = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
    std::string why;  // empty when every symbol was found
    int version = 0;
};

const Nccl& nccl() {
    static const Nccl lib = [] {
        Nccl n;
        void* h = dlopen(BB_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            n.why = fmt::format("NCCL cannot be loaded ({}); put the directory of libnccl.so.2 on LD_LIBRARY_PATH",
                                dlerror());
            return n;
        }
        const auto load = [&](auto& f, const char* name) {
            f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
            if (!f && n.why.empty()) n.why = fmt::format("libnccl.so.2 lacks {}", name);
        };
        load(n.get_version, "ncclGetVersion");
        load(n.get_unique_id, "ncclGetUniqueId");
        load(n.init_rank, "ncclCommInitRank");
        load(n.all_reduce, "ncclAllReduce");
        load(n.destroy, "ncclCommDestroy");
        load(n.error_string, "ncclGetErrorString");
        if (n.why.empty() && n.get_version(&n.version) != ncclSuccess) n.why = "ncclGetVersion failed";
        return n;
    }();
    return lib;
}

void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) fail("[backend cuda] NCCL {}: {}", what, nccl().error_string(r));
}
void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail("[backend cuda] {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

class NcclCollectives final : public Collectives {
public:
    NcclCollectives(cudaStream_t st, const ncclUniqueId& id, int rank, int size) : st_(st), rank_(rank), size_(size) {
        check(nccl().init_rank(&comm_, size, id, rank), "ncclCommInitRank");
        check(cudaStreamCreateWithFlags(&comm_st_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        check(cudaEventCreateWithFlags(&queued_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        check(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    ~NcclCollectives() override {
        nccl().destroy(comm_);
        cudaEventDestroy(summed_);
        cudaEventDestroy(queued_);
        cudaStreamDestroy(comm_st_);
    }
    void all_reduce_sum(float* p, size_t n) override {
        wait_started();  // in order after anything overlapped
        if (n) check(nccl().all_reduce(p, p, n, ncclFloat32, ncclSum, comm_, st_), "ncclAllReduce");
    }
    void start_sum(float* p, size_t n) override {
        if (!n) return;
        check(cudaEventRecord(queued_, st_), "cudaEventRecord");
        check(cudaStreamWaitEvent(comm_st_, queued_, 0), "cudaStreamWaitEvent");
        check(nccl().all_reduce(p, p, n, ncclFloat32, ncclSum, comm_, comm_st_), "ncclAllReduce");
        started_ = true;
    }
    void wait_started() override {
        if (!started_) return;
        check(cudaEventRecord(summed_, comm_st_), "cudaEventRecord");
        check(cudaStreamWaitEvent(st_, summed_, 0), "cudaStreamWaitEvent");
        started_ = false;
    }
    std::string describe() const override {
        const int v = nccl().version;  // e.g. 22803 (NCCL_VERSION_CODE's form since 2.9)
        return fmt::format("NCCL {}.{}.{} (rank {} of {})", v / 10000, v / 100 % 100, v % 100, rank_, size_);
    }

private:
    cudaStream_t st_;       // the backend's
    cudaStream_t comm_st_;  // the overlapped sums'
    cudaEvent_t queued_, summed_;
    bool started_ = false;  // a sum started since the last wait_started()
    int rank_, size_;
    ncclComm_t comm_ = nullptr;
};

}  // namespace

std::vector<std::byte> nccl_unique_id(std::string& why) {
    why = nccl().why;
    if (!why.empty()) return {};
    ncclUniqueId id;
    check(nccl().get_unique_id(&id), "ncclGetUniqueId");
    std::vector<std::byte> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    return bytes;
}

std::unique_ptr<Collectives> make_nccl_collectives(cudaStream_t st, std::span<const std::byte> id, int rank,
                                                   int size) {
    if (!nccl().why.empty()) fail("[backend cuda] {}", nccl().why);
    ncclUniqueId uid;
    if (id.size() != sizeof uid)
        fail("[backend cuda] NCCL unique id: expected {} bytes, got {}", sizeof uid, id.size());
    if (size < 1 || rank < 0 || rank >= size) fail("[backend cuda] NCCL: rank {} of {} is not a rank", rank, size);
    std::memcpy(&uid, id.data(), sizeof uid);
    return std::make_unique<NcclCollectives>(st, uid, rank, size);
}

#else  // a CUDA toolkit without nccl.h

std::vector<std::byte> nccl_unique_id(std::string& why) {
    why = "this binary was built without nccl.h (a CUDA toolkit without NCCL)";
    return {};
}
std::unique_ptr<Collectives> make_nccl_collectives(cudaStream_t, std::span<const std::byte>, int, int) {
    fail("[backend cuda] this binary was built without nccl.h");
}

#endif

}  // namespace bertbench::backend::cuda
