// The cached oneDNN matmul primitives (matmul.hpp).
#include "ops/matmul.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"

namespace bertbench::ops {

namespace {

// The matmul primitives, one per (type, shape, layout, epilogue), the most recently used kCapacity
// kept. On real data the packed token count N and the sequence lengths change from batch to batch,
// so the set of shapes grows without end; each primitive holds JIT code and buffers (a BERT-tiny
// run on real text grew by ~600 MB with an unbounded cache). A step needs ~15 linear-layer shapes
// plus 6 per distinct sequence length; re-creating an evicted one costs under a millisecond.
// Each primitive gets its scratchpad from the calling thread (user scratchpad mode), so the
// attention's per-head products can run the same primitive on several threads at once.
// (type, M, N, K, trans_b, lda, ldb, ldc, epilogue: 0 C = A·B, 1 C += A·B, 2 C = A·B + bias row,
// C's type); ldb = -1: B in the packed layout of (type, K, N) (PackedWeights).
using Key = std::tuple<int, int, int, int, bool, int, int, int, int, int>;
struct Matmul {
    dnnl::matmul prim;
    size_t scratch_bytes = 0;
};
struct Matmuls {
    static constexpr size_t kCapacity = 512;
    std::mutex mu;
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    std::list<std::pair<Key, Matmul>> lru;  // most recently used first
    std::map<Key, std::list<std::pair<Key, Matmul>>::iterator> index;
};
// Never destroyed: the threads' own caches (below) hold primitives and memory objects of its
// engine, and an OpenMP worker's thread_local objects may outlive static destructors.
Matmuls& matmuls() {
    static Matmuls* m = new Matmuls;
    return *m;
}

const char* type_name(MatmulType t) {
    switch (t) {
        case MatmulType::f32: return "f32";
        case MatmulType::bf16: return "bf16";
        case MatmulType::s8: return "s8";
        case MatmulType::s32: return "s32";
        case MatmulType::u8: return "u8";
    }
    return "?";
}

dnnl::memory::data_type dtype(MatmulType t) {
    using dt = dnnl::memory::data_type;
    switch (t) {
        case MatmulType::f32: return dt::f32;
        case MatmulType::bf16: return dt::bf16;
        case MatmulType::s8: return dt::s8;
        case MatmulType::s32: return dt::s32;
        case MatmulType::u8: return dt::u8;
    }
    return dt::f32;
}

// B's element type: A's, but int8 where A is uint8.
dnnl::memory::data_type b_dtype(MatmulType t) { return dtype(t == MatmulType::u8 ? MatmulType::s8 : t); }

bool integer(MatmulType t) { return t == MatmulType::s8 || t == MatmulType::u8; }

size_t type_bytes(MatmulType t) {
    return t == MatmulType::f32 || t == MatmulType::s32 ? 4 : t == MatmulType::bf16 ? 2 : 1;
}

// The type of C when a call names none: int32 for 8-bit operands, else f32.
MatmulType product_type(MatmulType t) { return integer(t) ? MatmulType::s32 : MatmulType::f32; }

dnnl::memory::desc md(int rows, int cols, dnnl::memory::data_type t, int ld, bool transposed) {
    // A logical (rows, cols) matrix stored row-major with leading dimension ld, or transposed:
    // stored (cols, rows) with leading dimension ld.
    using dims = dnnl::memory::dims;
    return transposed ? dnnl::memory::desc(dims{rows, cols}, t, dims{1, ld})
                      : dnnl::memory::desc(dims{rows, cols}, t, dims{ld, 1});
}

// The blocked layout oneDNN's matmul chooses for B of (type, K, N) (the same for every M), asked
// once per shape.
dnnl::memory::desc packed_md(MatmulType type, int K, int N) {
    static std::mutex mu;
    static std::map<std::tuple<int, int, int>, dnnl::memory::desc> known;
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_tuple(static_cast<int>(type), K, N);
    if (auto it = known.find(key); it != known.end()) return it->second;
    const dnnl::matmul::desc d(md(64, K, dtype(type), K, false),
                               dnnl::memory::desc({K, N}, b_dtype(type), dnnl::memory::format_tag::any),
                               md(64, N, dtype(product_type(type)), N, false));
    const dnnl::memory::desc w = dnnl::matmul::primitive_desc(d, matmuls().eng).weights_desc();
    known.emplace(key, w);
    return w;
}

// B's descriptor: (K, N) row-major with leading dimension ldb, transposed, or packed (ldb < 0).
dnnl::memory::desc b_md(MatmulType type, int K, int N, int ldb, bool trans_b) {
    return ldb < 0 ? packed_md(type, K, N) : md(K, N, b_dtype(type), ldb, trans_b);
}

dnnl::matmul::primitive_desc describe(const Key& k, const dnnl::engine& eng) {
    const auto [type, M, N, K, trans_b, lda, ldb, ldc, epilogue, c_type] = k;
    using dt = dnnl::memory::data_type;
    const dt in = dtype(static_cast<MatmulType>(type));
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (epilogue == 1) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
    }
    const auto src = md(M, K, in, lda, false),
               wei = b_md(static_cast<MatmulType>(type), K, N, ldb, trans_b),
               dst = md(M, N, dtype(static_cast<MatmulType>(c_type)), ldc, false);
    const dnnl::matmul::desc d = epilogue == 2 ? dnnl::matmul::desc(src, wei, md(1, N, dt::f32, N, false), dst)
                                               : dnnl::matmul::desc(src, wei, dst);
    return dnnl::matmul::primitive_desc(d, attr, eng);
}

Matmul matmul_for(const Key& k) {
    Matmuls& m = matmuls();
    std::lock_guard<std::mutex> lock(m.mu);
    if (auto it = m.index.find(k); it != m.index.end()) {
        m.lru.splice(m.lru.begin(), m.lru, it->second);
        return it->second->second;
    }
    const dnnl::matmul::primitive_desc pd = describe(k, m.eng);
    m.lru.emplace_front(k, Matmul{dnnl::matmul(pd), pd.scratchpad_desc().get_size()});
    m.index[k] = m.lru.begin();
    if (m.lru.size() > Matmuls::kCapacity) {  // a copy handed out earlier stays valid
        m.index.erase(m.lru.back().first);
        m.lru.pop_back();
    }
    return m.lru.front().second;
}

// The hit path without the lock: each thread keeps the primitives it ran last in a small
// direct-mapped table, each ready to run (memory objects, argument map and stream made once; a call
// only points them at its operands). A thread's table holds at most kSlots primitives, so the
// memory stays bounded by (kCapacity + kSlots · threads); an entry evicted from the shared cache
// stays valid in a thread that still holds it (primitives are reference-counted handles).
struct Bound {
    Key key{};
    bool used = false;
    Matmul mm;
    dnnl::memory a, b, c, bias, sp;
    std::unordered_map<int, dnnl::memory> args;
};
struct ThreadMatmuls {
    static constexpr size_t kSlots = 64;
    std::vector<Bound> slots = std::vector<Bound>(kSlots);
    dnnl::stream stream{matmuls().eng};
    std::vector<uint8_t> scratch;
};
ThreadMatmuls& thread_matmuls() {
    thread_local ThreadMatmuls t;
    return t;
}
size_t key_slot(const Key& k) {
    const auto [type, M, N, K, trans_b, lda, ldb, ldc, epilogue, c_type] = k;
    uint64_t h = 1469598103934665603ull;
    for (const uint64_t v : {uint64_t(type), uint64_t(M), uint64_t(N), uint64_t(K), uint64_t(trans_b),
                             uint64_t(lda), uint64_t(ldb), uint64_t(ldc), uint64_t(epilogue),
                             uint64_t(c_type)})
        h = (h ^ v) * 1099511628211ull;
    return static_cast<size_t>(h ^ (h >> 29)) % ThreadMatmuls::kSlots;
}

}  // namespace

void matmul(MatmulType type, bool trans_b, int M, int N, int K, const void* A, int lda,
            const void* B, int ldb, float beta, void* C, int ldc, const float* bias,
            MatmulType c_type) {
    BB_CHECK(integer(type) == (c_type == MatmulType::s32));
    BB_CHECK(!integer(type) || (beta == 0.f && !bias));
    if (M == 0 || N == 0) return;  // an empty C (oneDNN's primitive creation dies of SIGFPE at M = 0)
    try {
        const Key key{static_cast<int>(type), M, N, K, trans_b, lda, ldb, ldc,
                      bias ? 2 : beta == 1.f ? 1 : 0, static_cast<int>(c_type)};
        ThreadMatmuls& t = thread_matmuls();
        Bound& e = t.slots[key_slot(key)];
        if (!e.used || e.key != key) {
            e.used = false;
            e.mm = matmul_for(key);
            const dnnl::engine& eng = matmuls().eng;
            using dt = dnnl::memory::data_type;
            const dt in = dtype(type);
            e.a = dnnl::memory(md(M, K, in, lda, false), eng, const_cast<void*>(A));
            e.b = dnnl::memory(b_md(type, K, N, ldb, trans_b), eng, const_cast<void*>(B));
            e.c = dnnl::memory(md(M, N, dtype(c_type), ldc, false), eng, C);
            e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
            if (bias) {
                e.bias = dnnl::memory(md(1, N, dt::f32, N, false), eng, const_cast<float*>(bias));
                e.args[DNNL_ARG_BIAS] = e.bias;
            }
            if (e.mm.scratch_bytes > 0) {
                if (t.scratch.size() < e.mm.scratch_bytes) t.scratch.resize(e.mm.scratch_bytes);
                e.sp = dnnl::memory(
                    dnnl::memory::desc({static_cast<dnnl::memory::dim>(e.mm.scratch_bytes)}, dt::u8,
                                       dnnl::memory::format_tag::a),
                    eng, t.scratch.data());
                e.args[DNNL_ARG_SCRATCHPAD] = e.sp;
            }
            e.key = key;
            e.used = true;
        } else {
            e.a.set_data_handle(const_cast<void*>(A));
            e.b.set_data_handle(const_cast<void*>(B));
            e.c.set_data_handle(C);
            if (bias) e.bias.set_data_handle(const_cast<float*>(bias));
        }
        if (e.mm.scratch_bytes > 0) {
            // Another slot may have grown the thread's scratchpad since (a new address).
            if (t.scratch.size() < e.mm.scratch_bytes) t.scratch.resize(e.mm.scratch_bytes);
            e.sp.set_data_handle(t.scratch.data());
        }
        e.mm.prim.execute(t.stream, e.args);
        t.stream.wait();
    } catch (const dnnl::error& e) {
        if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
        fail("internal error: oneDNN {} matmul (M={}, N={}, K={}, trans_b={}, lda={}, ldb={}, "
             "ldc={}, bias={}): {}", type_name(type), M, N, K, trans_b,
             lda, ldb, ldc, bias != nullptr, e.what());
    }
}

void matmul_packed(MatmulType type, int M, int N, int K, const void* A, int lda, const void* packed_b,
                   void* C, int ldc, const float* bias, MatmulType c_type) {
    matmul(type, false, M, N, K, A, lda, packed_b, -1, 0.f, C, ldc, bias, c_type);
}

void PackedWeights::add(size_t offset, int K, int N, bool trans_b) {
    if (index_.count(offset)) return;
    size_t bytes = 0;
    try {
        bytes = (packed_md(type_, K, N).get_size() + 63) / 64 * 64;
    } catch (const dnnl::error& e) {
        fail("internal error: oneDNN has no {} matmul layout for K={}, N={}: {}", type_name(type_),
             K, N, e.what());
    }
    index_[offset] = entries_.size();
    entries_.push_back(Entry{offset, storage_.size(), K, N, trans_b});
    storage_.resize(storage_.size() + bytes);
}

void PackedWeights::pack(const void* src) {
    try {
        const dnnl::engine& eng = matmuls().eng;
        dnnl::stream stream(eng);
        const size_t elem = type_bytes(type_);
        for (const Entry& e : entries_) {
            const auto* from = static_cast<const unsigned char*>(src) + e.offset * elem;
            dnnl::memory in(md(e.K, e.N, b_dtype(type_), e.trans_b ? e.K : e.N, e.trans_b), eng,
                            const_cast<unsigned char*>(from));
            dnnl::memory out(packed_md(type_, e.K, e.N), eng, storage_.data() + e.at);
            dnnl::reorder(in, out).execute(stream, in, out);
        }
        stream.wait();
    } catch (const dnnl::error& e) {
        if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
        fail("internal error: oneDNN reorder of {} weights into the packed layout: {}",
             type_name(type_), e.what());
    }
}

const void* PackedWeights::at(size_t offset) const {
    const auto it = index_.find(offset);
    return it == index_.end() ? nullptr : storage_.data() + entries_[it->second].at;
}

bool matmul_avx_vnni() {
    // an ISA's bits include those of the ISAs below it; AVX2_VNNI's own bit is no AVX-512 ISA's
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
}

std::string matmul_impl(MatmulType type) {
    try {
        return describe(Key{static_cast<int>(type), 64, 64, 64, false, 64, 64, 64, 0,
                            static_cast<int>(product_type(type))},
                        matmuls().eng)
            .impl_info_str();
    } catch (const dnnl::error&) {
        return "";
    }
}

size_t cached_matmuls() {
    Matmuls& m = matmuls();
    std::lock_guard<std::mutex> lock(m.mu);
    return m.lru.size();
}

}  // namespace bertbench::ops
