// Reports of `bertbench bench`: the per-point table in table/md/csv/json form, an NVIDIA-style
// reproduction table (rows: threads; columns: configuration x batch size), hand-written SVG charts
// (throughput vs batch size per model; the per-op profile as horizontal bars) and the
// PerfZero-style JSON summary (benchmark_result, system_info, process_info, build_info).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "bench/runner.hpp"

namespace bertbench::bench {

enum class Format { table, md, csv, json };
Format parse_format(const std::string& name);  // Error naming --format

// Column names of the point table, in order (csv header = these, comma separated).
const std::vector<std::string>& point_columns();
// One row of values for `p` (a PointResult::to_json()), same order as point_columns().
std::vector<std::string> point_row(const nlohmann::json& p);
// The whole table; json = the array of points.
std::string format_points(const std::vector<nlohmann::json>& points, Format f);
// Markdown: one table per mode; rows = threads, columns = "model seqS bB" (sequences/s).
std::string reproduction_table_md(const std::vector<nlohmann::json>& points);
// A line chart (hand-written SVG): series of (x, y) points, y linear from 0, x log2 or linear
// with ticks at the data's x values, and an optional horizontal line (label, y) such as a bound.
struct LineSeries {
    std::string name;
    std::vector<std::pair<double, double>> points;
};
struct LineChart {
    std::string title, x_label, y_label;
    std::vector<LineSeries> series;
    bool log_x = false;
    std::optional<std::pair<std::string, double>> hline;
};
std::string line_chart_svg(const LineChart& c);
// SVG: sequences/s against batch size, one line per (mode, model, seq_len, threads).
std::string throughput_svg(const std::vector<nlohmann::json>& points, const std::string& title);

// What names one point of a sweep in text: "[squad ]<mode> <model> seq S batch B threads T[ spu K]
// <dtype>" (spu for training only: an inference point has no updates).
std::string point_label(const Point& p);
nlohmann::json profile_json(const ProfileResult& r);
std::string format_profile(const ProfileResult& r, Format f);  // table/md/csv; json = dump
// SVG: one horizontal bar per op (share of step time), for each profile (train, infer, ...).
std::string profile_svg(const std::vector<ProfileResult>& profiles);

// build_info() plus the GEMM libraries: oneDNN's version, runtime and ISA (float), OpenBLAS's config
// and core (double).
nlohmann::json build_info_with_gemm();
// {max_rss_mb, cpu_percent (user+sys CPU time / wall time x 100)} since process start.
nlohmann::json process_info(double wall_seconds);
// PerfZero-style summary of a run.
nlohmann::json perfzero_summary(const std::vector<nlohmann::json>& points,
                                const std::vector<nlohmann::json>& ceilings,
                                const std::vector<nlohmann::json>& profiles,
                                const nlohmann::json& flags, double wall_seconds);

}  // namespace bertbench::bench
