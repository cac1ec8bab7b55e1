// Storage for the big float buffers (parameters, gradients, optimizer slots, the engines' arenas):
// 64-byte aligned, so that every vector load of a row starts on a cache line, and, from 2 MiB up,
// 2 MiB aligned and advised as transparent huge pages (MADV_HUGEPAGE), so that a GEMM streaming a
// 440 MB weight table does not walk the page table every 4 KiB. Otherwise a std::vector like any
// other (the engines take std::span, so callers do not see the difference).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace bertbench {

template <typename T>
struct AlignedAllocator {
    using value_type = T;
    static constexpr size_t kHuge = size_t{2} << 20;

    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U>&) {}

    T* allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        const size_t align = bytes >= kHuge ? kHuge : 64;
        const size_t rounded = (bytes + align - 1) / align * align;
        void* p = std::aligned_alloc(align, rounded);
        if (!p) throw std::bad_alloc();
        if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is fine
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }

    template <typename U>
    bool operator==(const AlignedAllocator<U>&) const { return true; }
};

template <typename T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace bertbench
