// Helpers for the libFuzzer targets: an in-memory file that path-based readers can open, and the
// one rule every target checks: bad input ends in bertbench::Error (a one-line message), never in
// a crash, a sanitizer report, a hang or any other exception (which libFuzzer reports as a crash).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "model/batch.hpp"

namespace bertbench::fuzz {

// A memfd reopened through /proc/self/fd/N: readers see a regular file, nothing touches the disk.
class MemFile {
  public:
    MemFile() {
        fd_ = memfd_create("bb_fuzz", 0);
        if (fd_ < 0) std::abort();
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    // Replaces the contents; returns the path to open.
    const std::string& write(const uint8_t* data, size_t size) {
        if (ftruncate(fd_, 0) != 0) std::abort();
        size_t done = 0;
        while (done < size) {
            const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
            if (n <= 0) std::abort();
            done += static_cast<size_t>(n);
        }
        return path_;
    }
    const std::string& path() const { return path_; }

  private:
    int fd_ = -1;
    std::string path_;
};

// Runs f(); a bertbench::Error is the expected outcome for bad input and is swallowed, after
// checking the message is one line (the project's error contract).
template <typename F>
void expect_clean(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        const std::string m = e.what();
        if (m.empty() || m.find('\n') != std::string::npos) std::abort();
    }
}

// What the model relies on in a batch any reader produced: offsets increasing, ids and segments
// >= 0, every masked position inside its own sequence with an id >= 0 and a finite weight > 0,
// NSP labels 0/1. A violation aborts (libFuzzer reports it as a crash).
inline void check_batch_invariants(const model::Batch& b) {
    if (b.seq_offsets.size() != static_cast<size_t>(b.batch_size) + 1) std::abort();
    for (int s = 0; s < b.batch_size; ++s)
        if (b.seq_offsets[s + 1] <= b.seq_offsets[s]) std::abort();
    const size_t N = static_cast<size_t>(b.num_tokens());
    if (b.input_ids.size() != N || b.segment_ids.size() != N) std::abort();
    for (size_t i = 0; i < N; ++i)
        if (b.input_ids[i] < 0 || b.segment_ids[i] < 0) std::abort();
    const size_t P = b.masked_index.size();
    if (b.masked_ids.size() != P || b.masked_weights.size() != P || b.masked_seq.size() != P)
        std::abort();
    for (size_t p = 0; p < P; ++p) {
        const int s = b.masked_seq[p];
        if (s < 0 || s >= b.batch_size) std::abort();
        if (b.masked_index[p] < b.seq_offsets[s] || b.masked_index[p] >= b.seq_offsets[s + 1])
            std::abort();
        const float w = b.masked_weights[p];
        if (b.masked_ids[p] < 0 || !(w > 0) || !std::isfinite(w)) std::abort();
    }
    if (b.next_sentence_labels.size() != static_cast<size_t>(b.batch_size)) std::abort();
    for (int32_t l : b.next_sentence_labels)
        if (l != 0 && l != 1) std::abort();
}

}  // namespace bertbench::fuzz
