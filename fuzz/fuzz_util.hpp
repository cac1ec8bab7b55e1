// Helpers for the libFuzzer targets: an in-memory file that path-based readers can open, and the
// one rule every target checks: bad input ends in bertbench::Error (a one-line message), never in
// a crash, a sanitizer report, a hang or any other exception (which libFuzzer reports as a crash).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

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

}  // namespace bertbench::fuzz
