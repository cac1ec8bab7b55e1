// A backend for testing, on a machine without a GPU, the code written for a device's memory: the
// CPU backend's ops on memory the host may not touch. Every allocation is its own mapping, kept
// PROT_NONE except while one of this backend's ops, uploads, downloads or zeroes runs, so host code
// that reads or writes the backend's memory directly dies with SIGSEGV instead of passing here and
// failing on the GPU. One at a time per process: the op table holds plain function pointers, which
// reach the backend through a global. Tests may derive from it (e.g. to give it collectives).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "core/error.hpp"

namespace bertbench::testing {

class GuardedBackend : public backend::Backend {
public:
    GuardedBackend() : cpu_(backend::make_cpu_backend()) {
        if (current_) fail("[backend guarded] one at a time");
        current_ = this;
#define BB_GUARD_OP(name) \
    ops_.name = cpu_->ops().name ? &Guarded<&backend::Ops::name, decltype(backend::Ops::name)>::call : nullptr;
        BB_BACKEND_OPS(BB_GUARD_OP)
#undef BB_GUARD_OP
    }
    ~GuardedBackend() override { current_ = nullptr; }
    const char* name() const override { return "guarded"; }
    std::string describe() const override { return "the CPU backend's ops on memory the host may not touch"; }
    void* alloc(size_t bytes) override {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t size = (bytes + page - 1) / page * page;
        void* p = mmap(nullptr, size, open_ ? PROT_READ | PROT_WRITE : PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) fail("[backend guarded] no room for {} bytes", bytes);
        maps_[p] = size;
        return p;
    }
    void release(void* p) noexcept override {
        const auto it = maps_.find(p);
        if (it == maps_.end()) return;
        munmap(p, it->second);
        maps_.erase(it);
    }
    void upload(void* dst, const void* host, size_t bytes) override {
        const Open o;
        std::memcpy(dst, host, bytes);
    }
    void download(void* host, const void* src, size_t bytes) override {
        const Open o;
        std::memcpy(host, src, bytes);
    }
    void zero(void* dst, size_t bytes) override {
        const Open o;
        std::memset(dst, 0, bytes);
    }
    void synchronize() override {}
    bool host_memory() const override { return false; }
    size_t mappings() const { return maps_.size(); }

private:
    // The backend's memory readable and writable while one lives (nested: the outermost decides).
    struct Open {
        Open() {
            if (current_->open_++ == 0) current_->protect(PROT_READ | PROT_WRITE);
        }
        ~Open() {
            if (--current_->open_ == 0) current_->protect(PROT_NONE);
        }
        Open(const Open&) = delete;
        Open& operator=(const Open&) = delete;
    };
    void protect(int prot) {
        for (const auto& [p, size] : maps_)
            if (mprotect(p, size, prot) != 0) fail("[backend guarded] mprotect failed");
    }
    template <auto Field, typename Fn>
    struct Guarded;
    template <auto Field, typename R, typename... A>
    struct Guarded<Field, R (*)(A...)> {
        static R call(A... a) {
            const Open o;
            return (current_->cpu_->ops().*Field)(a...);
        }
    };

    static inline GuardedBackend* current_ = nullptr;
    std::unique_ptr<backend::Backend> cpu_;
    std::map<void*, size_t> maps_;
    int open_ = 0;
};

}  // namespace bertbench::testing
