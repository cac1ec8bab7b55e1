// The GEMM rate of a backend's gemm op (backend/backend.hpp), on any backend this build has:
// the ceiling MFU is read against (a large square product) and BERT's own shapes. Measures, never
// asserts. Each point: warm-up, then products until --min_time seconds have run, timed between two
// synchronize() calls (the product is queued on the device; launch overhead is in the figure),
// repeated --repeats times; the median is reported with the spread (min, max).
// Usage: backend_gemm [--device=cpu|cuda] [--dtype=bf16,fp32] [--shapes=8192x8192x8192,...]
//                     [--min_time=0.5] [--repeats=5] [--autotune]   (--help; one JSON object per
//                     point on stdout; --autotune: backend::CudaOptions)
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "bench/device_gemm.hpp"
#include "core/error.hpp"
#include "core/flags.hpp"
#include "ops/bf16.hpp"

using namespace bertbench;

namespace {

bench::GemmShape parse_shape(const std::string& s) {
    bench::GemmShape sh{s, 0, 0, 0, false, false, 1};
    if (std::sscanf(s.c_str(), "%dx%dx%d", &sh.m, &sh.n, &sh.k) != 3 || sh.m <= 0 || sh.n <= 0 || sh.k <= 0)
        fail("--shapes: expected MxNxK with positive sizes (e.g. 4096x1024x4096), got '{}'", s);
    return sh;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string device = "cpu", dtypes = "bf16,fp32";
        // the last two: the MLM decoder (an odd N)
        std::string shapes = "8192x8192x8192,4096x1024x1024,4096x4096x1024,4096x1024x4096,4096x768x768,4096x3072x768,"
                             "4096x768x3072,16384x1024x4096,640x30522x768,640x30522x1024";
        double min_time = 0.5;
        int repeats = 5;
        bool autotune = false;
        Flags flags("backend_gemm", "The GEMM rate of a backend's gemm op (bench/backend_gemm.cpp).");
        flags.add("device", &device, "cpu | cuda");
        flags.add("dtype", &dtypes, "bf16, fp32 (comma list)");
        flags.add("shapes", &shapes, "MxNxK, ... (comma list; C = A·B, row-major, fp32 C)");
        flags.add("min_time", &min_time, "seconds of products per repeat");
        flags.add("repeats", &repeats, "repeats per shape (median, min, max reported)");
        flags.add("autotune", &autotune, "cuda: time cuBLASLt's candidates per shape (backend::CudaOptions)");
        if (!flags.parse(argc, argv)) return 0;
        if (repeats < 1) fail("--repeats: expected >= 1, got {}", repeats);
        std::unique_ptr<backend::Backend> be;
        if (device == "cpu") be = backend::make_cpu_backend();
        else if (device == "cuda") be = backend::make_cuda_backend(0, backend::CudaOptions{autotune});
        else fail("--device: expected cpu or cuda, got '{}'", device);
        std::vector<bench::GemmShape> points;
        for (const std::string& s : split_commas(shapes)) points.push_back(parse_shape(s));
        std::fprintf(stderr, "backend_gemm: %s: %s\n", be->name(), be->describe().c_str());
        for (const std::string& dt : split_commas(dtypes)) {
            const ops::Precision precision = ops::parse_precision(dt, "--dtype");
            const auto type = precision == ops::Precision::bf16 ? backend::MatmulType::bf16 : backend::MatmulType::f32;
            for (const bench::GemmShape& s : points) {
                const bench::RateSpread r = bench::time_backend_gemm(*be, type, s, min_time, repeats);
                std::printf("{\"device\": \"%s\", \"describe\": \"%s\", \"dtype\": \"%s\", \"shape\": \"%s\", "
                            "\"tflops_median\": %.2f, \"tflops_min\": %.2f, \"tflops_max\": %.2f, \"repeats\": %d, "
                            "\"autotune\": %s}\n",
                            be->name(), be->describe().c_str(), ops::precision_name(precision), s.role.c_str(),
                            r.median / 1e3, r.min / 1e3, r.max / 1e3, repeats, autotune ? "true" : "false");
                std::fflush(stdout);
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
