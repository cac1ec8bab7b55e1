// Bucketed, overlapped gradient averaging (Horovod's tensor fusion, PyTorch DDP's buckets).
// The flat gradient buffer is cut into fixed buckets of `bucket_bytes`, counted from its END,
// because the backward finishes the heads and the top encoder layer first and those sit at the
// end of the ParamTable layout (GradientBuckets; also used for a device's own collectives,
// train/data_parallel.cpp). As the backward reports finished ranges (ready()), every bucket
// whose floats are all final starts an MPI_Iallreduce on a communication thread (its own
// duplicated communicator, polled with MPI_Test between short sleeps so it does not take a core
// from the compute threads); finish() starts what is left, waits, and leaves the MEAN over ranks
// in the buffer. Buckets start in the same order on every rank because every rank runs the same
// backward. Reduction is MPI's sum then * (1/N), so every rank holds the same bits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "dist/comm.hpp"

namespace bertbench::dist {

struct ReduceStats {
    double wait_s = 0;   // time finish() blocked: the communication the backward did not hide
    double span_s = 0;   // first bucket start .. last bucket done
    size_t bytes = 0;    // bytes all-reduced (per rank)
    int buckets = 0;
    int started_early = 0;  // buckets started before finish()
};

// Which buckets of a flat gradient buffer one backward has finished. Buckets of bucket_bytes
// (at least 1024 floats) counted from the buffer's end; boundaries: the offsets (floats) of the
// tensors in the buffer, to which a ready range is extended, so that the alignment padding
// between tensors never holds a bucket back.
class GradientBuckets {
public:
    using Start = std::function<void(size_t begin, size_t end)>;  // a bucket's floats [begin, end)
    GradientBuckets(size_t total_floats, std::vector<size_t> boundaries, size_t bucket_bytes);
    // A new backward into a buffer of buffer_floats (an Error when that is fewer than
    // total_floats): no bucket started.
    void begin(size_t buffer_floats);
    // [begin, end) will not change any more in this backward (ranges must not overlap): calls
    // start for every bucket this completes, in order.
    void ready(size_t begin, size_t end, const Start& start);
    // Calls start for every bucket not started yet, in order.
    void start_rest(const Start& start);
    int started() const { return started_; }
    int size() const { return static_cast<int>(buckets_.size()); }
    size_t bucket_floats() const { return bucket_floats_; }
    std::pair<size_t, size_t> range(int k) const {
        const Bucket& b = buckets_[static_cast<size_t>(k)];
        return {b.begin, b.end};
    }

private:
    struct Bucket {
        size_t begin = 0, end = 0;  // floats
        size_t ready = 0;           // floats reported ready
        bool started = false;
    };
    void start(size_t k, const Start& s);
    size_t total_, bucket_floats_;
    std::vector<size_t> boundaries_;
    std::vector<Bucket> buckets_;
    int started_ = 0;
};

class GradientReducer {
public:
    // boundaries and bucket_bytes: GradientBuckets'. overlap=false: nothing starts before
    // finish() (for measurements).
    GradientReducer(Comm& comm, size_t total_floats, std::vector<size_t> boundaries,
                    size_t bucket_bytes = size_t{4} << 20, bool overlap = true);
    ~GradientReducer();
    GradientReducer(const GradientReducer&) = delete;
    GradientReducer& operator=(const GradientReducer&) = delete;

    // A backward into `grads` (total_floats) begins; forget the previous one.
    void begin(std::span<float> grads);
    // grads[begin, end) will not change any more in this backward. Ranges must not overlap.
    void ready(size_t begin, size_t end);
    // Start the remaining buckets, wait for all, grads := mean over ranks. Returns this step's
    // statistics. With one rank: nothing to do (wait 0).
    ReduceStats finish();
    bool active() const { return size_ > 1; }
    size_t bucket_floats() const { return buckets_.bucket_floats(); }
    int num_buckets() const { return buckets_.size(); }

private:
    void launch(size_t begin, size_t end);  // main thread: hand a bucket to the communication side
    void thread_main();

    Comm* comm_;
    std::unique_ptr<Comm> own_;  // a duplicate of comm for the thread (MPI) or null
    int size_;
    size_t total_;
    bool overlap_;
    bool use_thread_;
    std::span<float> grads_;
    GradientBuckets buckets_;
    double t_first_start_ = 0;

    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable cv_, done_cv_;
    std::deque<std::pair<size_t, size_t>> queue_;  // buckets to start, in order
    int completed_ = 0;                            // buckets finished this step
    double t_last_done_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
};

// A duplicate of the communicator for a helper thread (MPI_Comm_dup): collectives on it never
// interleave with the main thread's. The one-process Comm returns another one-process Comm.
std::unique_ptr<Comm> duplicate(Comm& comm);

}  // namespace bertbench::dist
