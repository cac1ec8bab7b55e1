// Report formats of `bertbench bench`: csv has the documented columns and one row per point, md
// has matching column counts, the reproduction table puts threads in rows, the PerfZero summary
// has its sections, and --data batches are real unpadded sequences (real < padded tokens).
#include "bench/report.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "bench/runner.hpp"
#include "core/error.hpp"

namespace bertbench::bench {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::stringstream in(s);
    for (std::string item; std::getline(in, item, sep);) out.push_back(item);
    return out;
}

nlohmann::json fake_point(const std::string& mode, int batch, int threads, double seqs) {
    return {{"mode", mode},
            {"model", "tiny"},
            {"seq_len", 128},
            {"batch_size", batch},
            {"threads", threads},
            {"steps_per_update", 1},
            {"sequences_per_second", seqs},
            {"tokens_per_second", seqs * 128},
            {"padded_tokens_per_second", seqs * 128},
            {"step_ms_median", 1.5},
            {"step_ms_min", 1.0},
            {"step_ms_max", 2.0},
            {"latency_ms_p90", 2.0},
            {"latency_ms_p99", 2.0},
            {"gflops", 3.0},
            {"mfu", 0.25},
            {"peak_rss_mb", 10.0}};
}

TEST(Report, CsvHasHeaderAndOneRowPerPoint) {
    const std::vector<nlohmann::json> pts = {fake_point("train", 8, 1, 10),
                                             fake_point("infer", 32, 2, 99.5)};
    const auto lines = split(format_points(pts, Format::csv), '\n');
    ASSERT_EQ(lines.size(), 3u);
    const auto head = split(lines[0], ',');
    EXPECT_EQ(head, point_columns());
    for (const char* key :
         {"mode", "model", "seq_len", "batch_size", "threads", "sequences_per_second",
          "tokens_per_second", "padded_tokens_per_second", "latency_ms_p99", "mfu"})
        EXPECT_NE(std::find(head.begin(), head.end(), key), head.end()) << key;
    const auto row = split(lines[2], ',');
    ASSERT_EQ(row.size(), head.size());
    const size_t i = static_cast<size_t>(
        std::find(head.begin(), head.end(), "sequences_per_second") - head.begin());
    EXPECT_DOUBLE_EQ(std::strtod(row[i].c_str(), nullptr), 99.5);
}

// A field with a comma or quote (a --bert_config_file path) is quoted as RFC 4180 has it, the row
// keeping the header's column count.
TEST(Report, CsvQuotesFieldsWithCommasAndQuotes) {
    nlohmann::json p = fake_point("infer", 8, 1, 10);
    p["model"] = "cfg,v2 \"x\".json";
    const auto lines = split(format_points({p}, Format::csv), '\n');
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[1].find(",\"cfg,v2 \"\"x\"\".json\","), std::string::npos) << lines[1];
    // unquoted, the row has one comma more than the header
    EXPECT_EQ(std::count(lines[1].begin(), lines[1].end(), ','), std::count(lines[0].begin(), lines[0].end(), ',') + 1);
}

TEST(Report, MarkdownRowsHaveHeaderColumnCount) {
    const auto lines = split(format_points({fake_point("train", 8, 1, 10)}, Format::md), '\n');
    ASSERT_EQ(lines.size(), 3u);
    const auto bars = [](const std::string& s) { return std::count(s.begin(), s.end(), '|'); };
    EXPECT_EQ(bars(lines[0]), bars(lines[1]));
    EXPECT_EQ(bars(lines[0]), bars(lines[2]));
    EXPECT_EQ(static_cast<size_t>(bars(lines[0])), point_columns().size() + 1);
}

TEST(Report, ReproductionTableRowsAreThreads) {
    const std::vector<nlohmann::json> pts = {fake_point("train", 8, 1, 10),
                                             fake_point("train", 32, 1, 12),
                                             fake_point("train", 8, 2, 18)};
    const std::string md = reproduction_table_md(pts);
    EXPECT_NE(md.find("| threads | tiny s128 b8 | tiny s128 b32 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| 1 | 10.00 | 12.00 |"), std::string::npos) << md;
    EXPECT_NE(md.find("| 2 | 18.00 | – |"), std::string::npos) << md;
    // A dtype or steps_per_update sweep: a column each, none overwriting another.
    nlohmann::json bf16 = fake_point("train", 8, 1, 14), spu2 = fake_point("train", 8, 1, 16);
    bf16["dtype"] = "bf16";
    spu2["steps_per_update"] = 2;
    const std::string swept = reproduction_table_md({pts[0], bf16, spu2});
    EXPECT_NE(swept.find("| threads | tiny s128 b8 | tiny s128 b8 bf16 | tiny s128 b8 spu2 |"), std::string::npos)
        << swept;
    EXPECT_NE(swept.find("| 1 | 10.00 | 14.00 | 16.00 |"), std::string::npos) << swept;
}

TEST(Report, SvgAndPerfZeroSummary) {
    const std::vector<nlohmann::json> pts = {fake_point("train", 8, 1, 10),
                                             fake_point("train", 32, 1, 12)};
    const std::string svg = throughput_svg(pts, "t<1>");
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_NE(svg.find("t&lt;1&gt;"), std::string::npos);
    const nlohmann::json j = perfzero_summary(pts, {}, {}, nlohmann::json::object(), 1.5);
    EXPECT_EQ(j["benchmark_result"]["name"], "bertbench.bench");
    EXPECT_EQ(j["benchmark_result"]["wall_time"], 1.5);
    EXPECT_EQ(j["benchmark_result"]["metrics"].size(), 14u);  // 7 metrics x 2 points
    EXPECT_TRUE(j["system_info"].contains("cpu_model"));
    EXPECT_TRUE(j["process_info"].contains("cpu_percent"));
    EXPECT_TRUE(j["process_info"].contains("max_rss_mb"));
    EXPECT_FALSE(j["build_info"]["gemm_config"].get<std::string>().empty());
    EXPECT_TRUE(j["definitions"].contains("train_step"));
    EXPECT_THROW(parse_format("yaml"), Error);
}

TEST(DataMode, GoldenTfrecordIsUnpadded) {
    const char* shared = std::getenv("BB_SHARED_DIR");
    ASSERT_NE(shared, nullptr);
    const std::string file =
        std::string(shared) + "/golden/pretraining/public_128_s12345_d2.tfrecord";
    Point p{"infer", "tiny", model::BertConfig::preset("tiny"), 128, 4, 1, 1, 1, 3, {file}, 0};
    const PointResult r = run_point(p, 100.0);
    EXPECT_GT(r.tokens_per_second, 0);
    EXPECT_LT(r.tokens_per_second, r.padded_tokens_per_second);
    EXPECT_LT(r.real_token_fraction, 1.0);
    EXPECT_GT(r.real_token_fraction, 0.0);
    EXPECT_NEAR(r.padded_tokens_per_second, r.sequences_per_second * 128,
                1e-6 * r.padded_tokens_per_second);
    EXPECT_NEAR(r.mfu, r.gflops / 100.0, 1e-12);
    EXPECT_LE(r.latency_ms_p50, r.latency_ms_p90);
    EXPECT_LE(r.latency_ms_p90, r.latency_ms_p99);
    // The batches themselves: real sequences shorter than max_seq_length, same records each read.
    const auto a = read_batches({file}, p.config, 128, 20, 4, 2), b = read_batches({file}, p.config, 128, 20, 4, 2);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_LT(a[0].num_tokens(), 4 * 128);
    EXPECT_EQ(a[1].input_ids, b[1].input_ids);
    EXPECT_THROW(read_batches({file}, p.config, 128, 20, 5000, 1), Error);
    // ids the model has no row for: one error naming the file and the record, where it is decoded
    model::BertConfig small = p.config;
    small.vocab_size = 100;
    try {
        read_batches({file}, small, 128, 20, 4, 1);
        ADD_FAILURE() << "ids outside a 100-token vocabulary were accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("vocab_size"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace bertbench::bench
