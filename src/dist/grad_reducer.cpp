// GradientReducer: see grad_reducer.hpp.
#include "dist/grad_reducer.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/timing.hpp"

namespace bertbench::dist {

GradientBuckets::GradientBuckets(size_t total_floats, std::vector<size_t> boundaries, size_t bucket_bytes)
    : total_(total_floats),
      bucket_floats_(std::max<size_t>(bucket_bytes / sizeof(float), 1024)),
      boundaries_(std::move(boundaries)) {
    std::sort(boundaries_.begin(), boundaries_.end());
    for (size_t end = total_; end > 0;) {
        const size_t begin = end > bucket_floats_ ? end - bucket_floats_ : 0;
        buckets_.push_back({begin, end, 0, false});
        end = begin;
    }
}

void GradientBuckets::begin(size_t buffer_floats) {
    if (buffer_floats < total_)
        fail("[dist] gradient buffer of {} floats, expected {}", buffer_floats, total_);
    for (Bucket& b : buckets_) b.ready = 0, b.started = false;
    started_ = 0;
}

void GradientBuckets::ready(size_t begin, size_t end, const Start& start_fn) {
    if (begin >= end) return;
    // extend to the next tensor's start (alignment padding belongs to the tensor before it)
    const auto it = std::lower_bound(boundaries_.begin(), boundaries_.end(), end);
    end = std::min(it == boundaries_.end() ? total_ : *it, total_);
    if (begin >= end) return;
    // buckets are ordered from the end of the buffer: bucket k = [total - (k+1)B, total - kB)
    const size_t first = (total_ - end) / bucket_floats_;
    const size_t last = std::min((total_ - 1 - begin) / bucket_floats_, buckets_.size() - 1);
    for (size_t k = first; k <= last; ++k) {
        Bucket& b = buckets_[k];
        const size_t lo = std::max(b.begin, begin), hi = std::min(b.end, end);
        if (hi <= lo) continue;
        b.ready += hi - lo;
        if (b.ready > b.end - b.begin)
            fail("[dist] gradient range [{}, {}) reported ready twice", begin, end);
        if (b.ready == b.end - b.begin && !b.started) start(k, start_fn);
    }
}

void GradientBuckets::start_rest(const Start& start_fn) {
    for (size_t k = 0; k < buckets_.size(); ++k)
        if (!buckets_[k].started) start(k, start_fn);
}

void GradientBuckets::start(size_t k, const Start& start_fn) {
    buckets_[k].started = true;
    ++started_;
    start_fn(buckets_[k].begin, buckets_[k].end);
}

GradientReducer::GradientReducer(Comm& comm, size_t total_floats, std::vector<size_t> boundaries,
                                 size_t bucket_bytes, bool overlap)
    : comm_(&comm),
      size_(comm.size()),
      total_(total_floats),
      overlap_(overlap),
      buckets_(total_floats, std::move(boundaries), bucket_bytes) {
    use_thread_ = size_ > 1 && comm.threads_allowed();
    if (size_ > 1) {
        own_ = duplicate(comm);
        if (use_thread_) thread_ = std::thread([this] { thread_main(); });
    }
}

GradientReducer::~GradientReducer() {
    if (thread_.joinable()) {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
}

void GradientReducer::begin(std::span<float> grads) {
    buckets_.begin(grads.size());
    grads_ = grads.first(total_);
    std::lock_guard lock(mutex_);
    completed_ = 0;
}

void GradientReducer::ready(size_t begin, size_t end) {
    if (size_ == 1 || !overlap_) return;
    buckets_.ready(begin, end, [this](size_t b, size_t e) { launch(b, e); });
}

void GradientReducer::launch(size_t begin, size_t end) {
    if (buckets_.started() == 1) t_first_start_ = now_s();
    if (use_thread_) {
        {
            std::lock_guard lock(mutex_);
            queue_.emplace_back(begin, end);
        }
        cv_.notify_one();
    }
}

void GradientReducer::thread_main() {
    struct Active {
        size_t begin, end;
        int ticket;
    };
    std::vector<Active> active;
    const float inv = 1.0f / static_cast<float>(size_);
    std::unique_lock lock(mutex_);
    for (;;) {
        if (active.empty())
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        else
            cv_.wait_for(lock, std::chrono::microseconds(20), [&] { return stop_ || !queue_.empty(); });
        if (stop_ && queue_.empty() && active.empty()) return;
        std::vector<std::pair<size_t, size_t>> start(queue_.begin(), queue_.end());
        queue_.clear();
        lock.unlock();
        int done_now = 0;
        double t_done = 0;
        try {
            for (const auto& [b, e] : start)
                active.push_back({b, e, own_->start_all_reduce_sum(grads_.subspan(b, e - b))});
            for (size_t i = 0; i < active.size();) {
                if (!own_->test(active[i].ticket)) {
                    ++i;
                    continue;
                }
                for (float& x : grads_.subspan(active[i].begin, active[i].end - active[i].begin)) x *= inv;
                active.erase(active.begin() + static_cast<std::ptrdiff_t>(i));
                ++done_now;
                t_done = now_s();
            }
        } catch (...) {
            lock.lock();
            error_ = std::current_exception();
            completed_ = buckets_.size();
            done_cv_.notify_all();
            return;
        }
        lock.lock();
        if (done_now > 0) {
            completed_ += done_now;
            t_last_done_ = t_done;
            done_cv_.notify_all();
        }
    }
}

ReduceStats GradientReducer::finish() {
    ReduceStats s;
    if (size_ == 1) return s;
    s.started_early = buckets_.started();
    const double t0 = now_s();
    buckets_.start_rest([this](size_t b, size_t e) { launch(b, e); });
    if (use_thread_) {
        std::unique_lock lock(mutex_);
        done_cv_.wait(lock, [&] { return completed_ == buckets_.size(); });
        if (error_) std::rethrow_exception(error_);
        s.span_s = t_last_done_ - t_first_start_;
    } else {
        // No MPI_THREAD_MULTIPLE: reduce here, bucket by bucket, in the same order.
        const float inv = 1.0f / static_cast<float>(size_);
        for (int k = 0; k < buckets_.size(); ++k) {
            const auto [b, e] = buckets_.range(k);
            const std::span<float> d = grads_.subspan(b, e - b);
            own_->wait(own_->start_all_reduce_sum(d));
            for (float& x : d) x *= inv;
        }
        s.span_s = now_s() - t_first_start_;
    }
    s.wait_s = now_s() - t0;
    s.bytes = total_ * sizeof(float);
    s.buckets = buckets_.size();
    return s;
}

}  // namespace bertbench::dist
