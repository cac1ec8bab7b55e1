// The GEMM rate of a backend's gemm op (backend/backend.hpp), on any backend this build has:
// the ceiling MFU is read against (a large square product) and BERT's own shapes. Measures, never
// asserts. Each point: warm-up, then products until --min_time seconds have run, timed between two
// synchronize() calls (the product is queued on the device; launch overhead is in the figure),
// repeated --repeats times; the median is reported with the spread (min, max).
// Usage: backend_gemm [--device=cpu|cuda] [--dtype=bf16,fp32] [--shapes=8192x8192x8192,...]
//                     [--min_time=0.5] [--repeats=5] [--autotune]
//                     (one JSON object per point on stdout; --autotune: backend::CudaOptions)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "ops/bf16.hpp"

using namespace bertbench;
using bertbench::backend::Backend;

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        const size_t e = std::min(s.find(',', b), s.size());
        if (e > b) out.push_back(s.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

struct Shape {
    int M, N, K;
    std::string label;
};

Shape parse_shape(const std::string& s) {
    Shape sh{0, 0, 0, s};
    if (std::sscanf(s.c_str(), "%dx%dx%d", &sh.M, &sh.N, &sh.K) != 3 || sh.M <= 0 || sh.N <= 0 || sh.K <= 0)
        fail("--shapes: expected MxNxK with positive sizes (e.g. 4096x1024x4096), got '{}'", s);
    return sh;
}

double run_point(Backend& be, backend::MatmulType type, const Shape& s, double min_time) {
    const size_t es = type == backend::MatmulType::bf16 ? 2 : 4;
    const size_t na = static_cast<size_t>(s.M) * s.K, nb = static_cast<size_t>(s.K) * s.N;
    const size_t nc = static_cast<size_t>(s.M) * s.N;
    void* a = be.alloc(na * es);
    void* b = be.alloc(nb * es);
    void* c = be.alloc(nc * 4);
    // Operands of random-looking values in [-0.5, 0.5) (zeros run faster on some tensor cores).
    const size_t n = std::max(na, nb);
    std::vector<float> vals(n);
    for (size_t i = 0; i < n; ++i) vals[i] = static_cast<float>((i * 2654435761u) >> 24 & 0xff) / 256.f - 0.5f;
    std::vector<backend::bf16> half(n);
    for (size_t i = 0; i < n; ++i) half[i] = ops::to_bf16(vals[i]);
    const void* src = es == 2 ? static_cast<const void*>(half.data()) : static_cast<const void*>(vals.data());
    be.upload(a, src, na * es);
    be.upload(b, src, nb * es);
    const auto gemm = BB_OP(be, gemm);
    const auto once = [&] {
        gemm(type, false, false, s.M, s.N, s.K, a, s.K, b, s.N, 0.f, c, s.N, nullptr, backend::MatmulType::f32);
    };
    once();
    be.synchronize();
    using clock = std::chrono::steady_clock;
    long iters = 0;
    const auto t0 = clock::now();
    double secs = 0;
    while (secs < min_time) {
        const long batch = std::max<long>(1, iters);
        for (long i = 0; i < batch; ++i) once();
        be.synchronize();
        iters += batch;
        secs = std::chrono::duration<double>(clock::now() - t0).count();
    }
    be.release(a);
    be.release(b);
    be.release(c);
    return 2.0 * s.M * s.N * s.K * iters / secs / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string device = "cpu", dtypes = "bf16,fp32";
        std::string shapes = "8192x8192x8192,4096x1024x1024,4096x4096x1024,4096x1024x4096,4096x768x768,4096x3072x768,"
                             "4096x768x3072,16384x1024x4096,640x30522x768,640x30522x1024";  // the last two: the MLM decoder (odd N)
        double min_time = 0.5;
        int repeats = 5;
        bool autotune = false;
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            const auto value = [&](const char* flag) -> const char* {
                const size_t n = std::strlen(flag);
                return a.compare(0, n, flag) == 0 && a.size() > n && a[n] == '=' ? argv[i] + n + 1 : nullptr;
            };
            if (const char* v = value("--device")) device = v;
            else if (const char* v2 = value("--dtype")) dtypes = v2;
            else if (const char* v3 = value("--shapes")) shapes = v3;
            else if (const char* v4 = value("--min_time")) min_time = std::stod(v4);
            else if (const char* v5 = value("--repeats")) repeats = std::stoi(v5);
            else if (a == "--autotune") autotune = true;
            else fail("backend_gemm: unknown argument '{}' (see the usage at the top of bench/backend_gemm.cpp)", a);
        }
        std::unique_ptr<Backend> be;
        if (device == "cpu") be = backend::make_cpu_backend();
        else if (device == "cuda") be = backend::make_cuda_backend(0, backend::CudaOptions{autotune});
        else fail("--device: expected cpu or cuda, got '{}'", device);
        std::vector<Shape> points;
        for (const std::string& s : split(shapes)) points.push_back(parse_shape(s));
        std::fprintf(stderr, "backend_gemm: %s: %s\n", be->name(), be->describe().c_str());
        for (const std::string& dt : split(dtypes)) {
            if (dt != "bf16" && dt != "fp32") fail("--dtype: expected bf16 or fp32, got '{}'", dt);
            const auto type = dt == "bf16" ? backend::MatmulType::bf16 : backend::MatmulType::f32;
            for (const Shape& s : points) {
                std::vector<double> r;
                for (int k = 0; k < repeats; ++k) r.push_back(run_point(*be, type, s, min_time));
                std::sort(r.begin(), r.end());
                std::printf("{\"device\": \"%s\", \"describe\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", "
                            "\"tflops_median\": %.2f, \"tflops_min\": %.2f, \"tflops_max\": %.2f, \"repeats\": %d, "
                            "\"autotune\": %s}\n",
                            be->name(), be->describe().c_str(), dt.c_str(), s.label.c_str(), r[r.size() / 2],
                            r.front(), r.back(), repeats, autotune ? "true" : "false");
                std::fflush(stdout);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
