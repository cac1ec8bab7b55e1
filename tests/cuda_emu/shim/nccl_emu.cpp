// NCCL for the emulated GPU (nccl.h beside this file): libbb_nccl_emu.so, which the emulated CUDA
// backend dlopens in place of libnccl.so.2, so that src/backend/cuda/nccl.cpp — the communicator
// from rank 0's unique id, the sums on the backend's stream and the overlapped ones on a stream of
// their own — runs under mpirun on a machine without a GPU. NCCL rank r is MPI_COMM_WORLD's rank r
// (the processes mpirun started, which is what the backend's caller pairs them with); the sums are
// MPI's, on a duplicate of MPI_COMM_WORLD, at the call, of the values the stream's earlier work
// (and what it waits for) leaves — the emulated stream catches up first — and the result is
// written when the stream gets there: work on another stream that does not wait for an event
// recorded after the sum sees the buffer as it was (cuda_runtime.h). Both go through the
// executable's cudaMemcpyAsync (tests/CMakeLists.txt exports it): the host may not touch device
// memory otherwise. Checked as NCCL would fail on them: every
// rank's unique id the same, nranks and rank those of MPI_COMM_WORLD, a float sum. A process that
// mpirun did not start is one rank of one (the conformance test's BackendCollectives).
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "nccl.h"

struct ncclComm {
    MPI_Comm comm = MPI_COMM_NULL;  // null: one rank outside MPI, whose sums change nothing
};

namespace {

bool mpi_running() {
    int init = 0, done = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&done);
    return init && !done;
}

ncclResult_t refuse(ncclResult_t r, const char* why) {
    std::fprintf(stderr, "nccl_emu: %s\n", why);
    return r;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
    *version = 29900;  // "2.99.0": not a real NCCL's
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    std::memset(id->internal, 0, sizeof id->internal);
    const long long stamp[2] = {static_cast<long long>(getpid()),
                                std::chrono::steady_clock::now().time_since_epoch().count()};
    std::memcpy(id->internal, stamp, sizeof stamp);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    if (!mpi_running()) {
        if (nranks != 1 || rank != 0)
            return refuse(ncclInvalidUsage, "ranks without MPI (the emulation's ranks are MPI's)");
        *comm = new ncclComm;
        return ncclSuccess;
    }
    int size = 0, me = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    // every rank takes part in both collectives before any refuses, so that none is left waiting
    ncclUniqueId root = id;
    MPI_Bcast(root.internal, NCCL_UNIQUE_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    const int mine = nranks == size && rank == me,
              same = std::memcmp(root.internal, id.internal, NCCL_UNIQUE_ID_BYTES) == 0;
    int all = 0, ok = mine && same;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!mine) return refuse(ncclInvalidArgument, "nranks/rank are not MPI_COMM_WORLD's");
    if (!same) return refuse(ncclInvalidArgument, "the ranks were given different unique ids");
    if (!all) return refuse(ncclInvalidArgument, "another rank's arguments were refused");
    *comm = new ncclComm;
    MPI_Comm_dup(MPI_COMM_WORLD, &(*comm)->comm);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    if (!comm) return refuse(ncclInvalidUsage, "no communicator");
    if (type != ncclFloat32 || op != ncclSum)
        return refuse(ncclInvalidArgument, "only float sums are emulated");
    if (comm->comm != MPI_COMM_NULL && !mpi_running())
        return refuse(ncclInvalidUsage, "MPI has ended");
    std::vector<float> sum(count);  // the send buffer once the stream's earlier work is done
    if (cudaMemcpyAsync(sum.data(), send, count * sizeof(float), cudaMemcpyDeviceToHost, stream) !=
        cudaSuccess)
        return ncclUnhandledCudaError;
    for (size_t done = 0; comm->comm != MPI_COMM_NULL && done < count;) {
        const int n = static_cast<int>(count - done < INT_MAX ? count - done : INT_MAX);
        MPI_Allreduce(MPI_IN_PLACE, sum.data() + done, n, MPI_FLOAT, MPI_SUM, comm->comm);
        done += static_cast<size_t>(n);
    }
    if (cudaMemcpyAsync(recv, sum.data(), count * sizeof(float), cudaMemcpyHostToDevice, stream) !=
        cudaSuccess)
        return ncclUnhandledCudaError;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm && comm->comm != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(&comm->comm);
    delete comm;
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess:
            return "no error";
        case ncclInvalidArgument:
            return "invalid argument";
        case ncclInvalidUsage:
            return "invalid usage";
        default:
            return "unhandled error";
    }
}

}  // extern "C"
