// The GEMM rate of a backend's gemm op (backend/backend.hpp), on any backend this build has:
// the ceiling MFU is read against (a large square product) and BERT's own shapes. Measures, never
// asserts. Each point: warm-up, then products until --min_time seconds have run, timed between two
// synchronize() calls (the product is queued on the device; launch overhead is in the figure),
// repeated --repeats times; the median is reported with the spread (min, max).
// Usage: backend_gemm [--device=cpu|cuda] [--dtype=bf16,fp32] [--shapes=8192x8192x8192,...]
//                     [--min_time=0.5] [--repeats=5] [--autotune]
//                     (one JSON object per point on stdout; --autotune: backend::CudaOptions)
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "bench/device_gemm.hpp"
#include "core/error.hpp"

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
                const bench::RateSpread rs =
                    bench::time_backend_gemm(*be, type, bench::GemmShape{s.label, s.M, s.N, s.K, false, false, 1},
                                             min_time, repeats);
                r = {rs.min / 1e3, rs.median / 1e3, rs.max / 1e3};
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
