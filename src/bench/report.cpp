// Report formatting for `bertbench bench` (see report.hpp). SVG is written by hand; the tick
// helper is shared with train/svg_plot.
#include "bench/report.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/sysinfo.hpp"
#include "ops/bf16.hpp"
#include "ops/int8.hpp"
#include "ops/kernels.hpp"
#include "train/svg_plot.hpp"

extern "C" {
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

namespace bertbench::bench {
namespace {

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '&':
                out += "&amp;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string num(const nlohmann::json& v, int decimals) {
    if (v.is_null()) return "-";  // not measured (an MFU without a ceiling)
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    if (v.is_number()) return fmt::format("{:.{}f}", v.get<double>(), decimals);
    if (v.is_string()) return v.get<std::string>();
    return v.dump();
}

struct Column {
    const char* key;
    const char* head;
    int width;
    int decimals;
};

const std::vector<Column>& columns() {
    static const std::vector<Column> c = {{"mode", "mode", -6, 0},
                                          {"model", "model", -8, 0},
                                          {"seq_len", "seq", 5, 0},
                                          {"batch_size", "batch", 5, 0},
                                          {"threads", "thr", 3, 0},
                                          {"steps_per_update", "spu", 3, 0},
                                          {"dtype", "dtype", -5, 0},
                                          {"sequences_per_second", "seq/s", 10, 2},
                                          {"tokens_per_second", "tokens/s", 10, 0},
                                          {"padded_tokens_per_second", "padded/s", 10, 0},
                                          {"step_ms_median", "ms(med)", 9, 1},
                                          {"step_ms_min", "ms(min)", 9, 1},
                                          {"step_ms_max", "ms(max)", 9, 1},
                                          {"latency_ms_p90", "p90", 8, 1},
                                          {"latency_ms_p99", "p99", 8, 1},
                                          {"gflops", "GFLOP/s", 8, 1},
                                          {"mfu", "MFU", 6, 3},
                                          {"peak_rss_mb", "RSS MB", 7, 0},
                                          {"task", "task", -11, 0}};
    return c;
}

std::string pad(const std::string& s, int width) {
    const size_t w = static_cast<size_t>(std::abs(width));
    if (s.size() >= w) return s;
    return width < 0 ? s + std::string(w - s.size(), ' ') : std::string(w - s.size(), ' ') + s;
}

std::string config_name(const nlohmann::json& p) {
    return fmt::format("{} s{}", p.value("model", std::string()), p.value("seq_len", 0));
}

// Colours for series (colour-blind-friendly palette).
const char* colour(size_t i) {
    static const char* c[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                              "#e69f00", "#56b4e9", "#000000", "#f0e442"};
    return c[i % 8];
}

// " spu2" for a point of 2 micro-steps per update ("" for 1).
std::string spu_suffix(const nlohmann::json& p) {
    const int spu = p.value("steps_per_update", 1);
    return spu > 1 ? fmt::format(" spu{}", spu) : std::string();
}

// What else a sweep may vary within one mode and model: " bf16", " spu2" (nothing for fp32, 1).
std::string sweep_suffix(const nlohmann::json& p) {
    const std::string dtype = p.value("dtype", std::string("fp32"));
    return (dtype == "fp32" ? std::string() : " " + dtype) + spu_suffix(p);
}

}  // namespace

Format parse_format(const std::string& name) {
    if (name == "table") return Format::table;
    if (name == "md") return Format::md;
    if (name == "csv") return Format::csv;
    if (name == "json") return Format::json;
    fail("--format: expected table, md, csv or json, got \"{}\"", name);
}

const std::vector<std::string>& point_columns() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (const Column& c : columns()) n.push_back(c.key);
        return n;
    }();
    return names;
}

std::vector<std::string> point_row(const nlohmann::json& p) {
    std::vector<std::string> row;
    for (const Column& c : columns())
        row.push_back(p.contains(c.key)                 ? num(p[c.key], c.decimals)
                      : std::string_view(c.key) == "task" ? "pretraining"  // points made before --task
                                                        : "");
    return row;
}

namespace {

// RFC 4180: a field holding a comma, quote or line break is quoted, its quotes doubled (a
// --bert_config_file path with a comma added a column).
std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
    std::string q = "\"";
    for (const char c : v) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + '"';
}

}  // namespace

std::string format_points(const std::vector<nlohmann::json>& points, Format f) {
    if (f == Format::json) return nlohmann::json(points).dump(2) + "\n";
    std::string out;
    const auto& cols = columns();
    if (f == Format::csv) {
        for (size_t i = 0; i < cols.size(); ++i) {
            if (i) out += ',';
            out += cols[i].key;
        }
        out += "\n";
        for (const auto& p : points) {
            const auto row = point_row(p);
            for (size_t i = 0; i < row.size(); ++i) {
                if (i) out += ',';
                out += p.contains(cols[i].key) && p[cols[i].key].is_null() ? "" : csv_field(row[i]);  // CSV's NA
            }
            out += "\n";
        }
        return out;
    }
    if (f == Format::md) {
        out += "|";
        for (const Column& c : cols) out += fmt::format(" {} |", c.head);
        out += "\n|";
        for (const Column& c : cols) out += c.width < 0 ? "---|" : "---:|";
        out += "\n";
        for (const auto& p : points) {
            out += "|";
            for (const std::string& v : point_row(p)) {
                out += ' ';
                out += v;
                out += " |";
            }
            out += "\n";
        }
        return out;
    }
    for (size_t i = 0; i < cols.size(); ++i) {
        if (i) out += ' ';
        out += pad(cols[i].head, cols[i].width);
    }
    out += "\n";
    for (const auto& p : points) {
        const auto row = point_row(p);
        for (size_t i = 0; i < cols.size(); ++i) {
            if (i) out += ' ';
            out += pad(row[i], cols[i].width);
        }
        out += "\n";
    }
    return out;
}

std::string reproduction_table_md(const std::vector<nlohmann::json>& points) {
    std::string out;
    std::vector<std::string> modes;  // "mode" (task pretraining) or "squad mode"
    const auto mode_of = [](const nlohmann::json& p) {
        const std::string task = p.value("task", std::string("pretraining"));
        return (task == "pretraining" ? "" : task + " ") + p["mode"].get<std::string>();
    };
    for (const auto& p : points)
        if (std::find(modes.begin(), modes.end(), mode_of(p)) == modes.end())
            modes.push_back(mode_of(p));
    for (const std::string& mode : modes) {
        std::vector<std::string> cols;  // "model sS bB"
        std::set<int> threads;
        std::map<std::pair<int, std::string>, double> cell;
        for (const auto& p : points) {
            if (mode_of(p) != mode) continue;
            const std::string col = fmt::format("{} b{}{}", config_name(p), p["batch_size"].get<int>(),
                                                sweep_suffix(p));
            if (std::find(cols.begin(), cols.end(), col) == cols.end()) cols.push_back(col);
            threads.insert(p["threads"].get<int>());
            cell[{p["threads"].get<int>(), col}] = p["sequences_per_second"].get<double>();
        }
        out += fmt::format(
            "**{}** (sequences/s; rows: threads; columns: model, seq_len, batch size, and dtype and "
            "micro-steps per update where not fp32 and 1)\n\n",
            mode == "train"         ? "Training"
            : mode == "infer"       ? "Inference"
            : mode == "squad train" ? "SQuAD training"
            : mode == "squad infer" ? "SQuAD inference"
                                    : mode);
        out += "| threads |";
        for (const auto& c : cols) {
            out += ' ';
            out += c;
            out += " |";
        }
        out += "\n|---:|";
        for (size_t i = 0; i < cols.size(); ++i) out += "---:|";
        out += "\n";
        for (int t : threads) {
            out += fmt::format("| {} |", t);
            for (const auto& c : cols) {
                const auto it = cell.find({t, c});
                out += it == cell.end() ? " – |" : fmt::format(" {:.2f} |", it->second);
            }
            out += "\n";
        }
        out += "\n";
    }
    return out;
}

std::string line_chart_svg(const LineChart& c) {
    constexpr double W = 860, H = 480, x0 = 80, x1 = 620, y0 = 50, y1 = 420;
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
        "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" "
        "fill=\"white\"/>\n<text x=\"{}\" y=\"28\" text-anchor=\"middle\" "
        "font-size=\"16\">{}</text>\n",
        W, H, W, H, (x0 + x1) / 2, escape(c.title));
    double xmin = 1e300, xmax = -1e300, ymax = c.hline ? c.hline->second : 0;
    for (const auto& s : c.series)
        for (const auto& [x, y] : s.points) {
            xmin = std::min(xmin, x);
            xmax = std::max(xmax, x);
            ymax = std::max(ymax, y);
        }
    if (xmin > xmax) return svg + "<text x=\"300\" y=\"240\">no data</text>\n</svg>\n";
    // x: log2 or linear over the data's x values (ticks at them), y: linear from 0.
    const auto fx = [&](double x) { return c.log_x ? std::log2(x) : x; };
    const double lx0 = fx(xmin), lx1 = std::max(fx(xmax), lx0 + (c.log_x ? 1 : std::max(1e-9, 0.1 * std::abs(lx0))));
    const std::vector<double> yt = train::nice_ticks(0, ymax > 0 ? ymax * 1.05 : 1, 6);
    const double ytop = yt.back();
    const auto sx = [&](double x) { return x0 + (fx(x) - lx0) / (lx1 - lx0) * (x1 - x0); };
    const auto sy = [&](double y) { return y1 - y / ytop * (y1 - y0); };
    for (double v : yt)
        svg += fmt::format(
            "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n"
            "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"12\">{:g}</text>\n",
            x0, sy(v), x1, sy(v), x0 - 6, sy(v) + 4, v);
    std::set<double> xs;
    for (const auto& s : c.series)
        for (const auto& [x, y] : s.points) xs.insert(x);
    for (double x : xs)
        svg += fmt::format(
            "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>\n"
            "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\" "
            "font-size=\"12\">{4:g}</text>\n",
            sx(x), y0, y1, y1 + 16, x);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", x0,
        y0, x1 - x0, y1 - y0);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                       (x0 + x1) / 2, y1 + 38, escape(c.x_label));
    svg += fmt::format(
        "<text transform=\"translate({},{}) rotate(-90)\" text-anchor=\"middle\" "
        "font-size=\"13\">{}</text>\n",
        x0 - 56, (y0 + y1) / 2, escape(c.y_label));
    size_t legend = 0;
    if (c.hline) {
        svg += fmt::format(
            "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n"
            "<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#c00\">{}</text>\n",
            x0, sy(c.hline->second), x1, sy(c.hline->second), x1 + 15, y0 + 14, escape(c.hline->first));
        ++legend;
    }
    for (size_t i = 0; i < c.series.size(); ++i) {
        auto pts = c.series[i].points;
        std::sort(pts.begin(), pts.end());
        std::string path;
        for (const auto& [x, y] : pts)
            path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", sx(x), sy(y));
        svg += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                           path, colour(i));
        for (const auto& [x, y] : pts)
            svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n",
                               sx(x), sy(y), colour(i));
        const double ly = y0 + 10 + 20.0 * static_cast<double>(legend + i);
        svg += fmt::format(
            "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-width=\"3\"/>\n"
            "<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\">{}</text>\n",
            x1 + 15, ly, x1 + 40, ly, colour(i), x1 + 46, ly + 4, escape(c.series[i].name));
    }
    return svg + "</svg>\n";
}

std::string throughput_svg(const std::vector<nlohmann::json>& points, const std::string& title) {
    LineChart c;
    c.title = title;
    c.x_label = "batch size (sequences, log scale)";
    c.y_label = "sequences / second";
    c.log_x = true;
    for (const auto& p : points) {
        if (!p.contains("sequences_per_second")) continue;
        const std::string task = p.value("task", std::string("pretraining"));
        const std::string key = fmt::format("{}{} {} {} s{} t{}{}",
                                            task == "pretraining" ? "" : task + " ",
                                            p["mode"].get<std::string>(),
                                            p["model"].get<std::string>(),
                                            p.value("dtype", "fp32"), p["seq_len"].get<int>(),
                                            p["threads"].get<int>(), spu_suffix(p));
        auto it = std::find_if(c.series.begin(), c.series.end(),
                               [&](const auto& s) { return s.name == key; });
        if (it == c.series.end()) it = c.series.insert(c.series.end(), {key, {}});
        it->points.emplace_back(p["batch_size"].get<double>(), p["sequences_per_second"].get<double>());
    }
    return line_chart_svg(c);
}

std::string point_label(const Point& p) {
    return fmt::format("{}{} {} seq {} batch {} threads {}{} {}", p.task == "pretraining" ? "" : p.task + " ", p.mode,
                       p.model, p.seq_len, p.batch_size, p.threads,
                       p.mode == "train" ? fmt::format(" spu {}", p.steps_per_update) : std::string(),
                       ops::precision_name(p.dtype));
}

nlohmann::json profile_json(const ProfileResult& r) {
    nlohmann::json rows = nlohmann::json::array();
    for (const ProfileRow& row : r.rows)
        rows.push_back({{"op", row.op},
                        {"ms_per_step", row.ms_per_step},
                        {"share", row.share},
                        {"gflops", row.gflops},
                        {"gbytes_per_s", row.gbytes_per_s}});
    // the fields that tell the point apart, as its point object names them (PointResult::to_json)
    nlohmann::json j = {{"mode", r.point.mode},
                        {"model", r.point.model},
                        {"seq_len", r.point.seq_len},
                        {"batch_size", r.point.batch_size},
                        {"threads", r.point.threads},
                        {"steps_per_update", r.point.steps_per_update},
                        {"dtype", ops::precision_name(r.point.dtype)},
                        {"data_files", r.point.data_files},
                        {"task", r.point.task},
                        {"step_ms", r.step_ms},
                        {"ops", rows}};
    if (r.point.task == "squad")
        j["squad_layout"] = r.point.data_files.empty() ? "full" : r.point.squad_layout;
    else
        j["last_layer_subset"] = r.point.last_layer_subset;
    return j;
}

std::string format_profile(const ProfileResult& r, Format f) {
    if (f == Format::json) return profile_json(r).dump(2) + "\n";
    std::string out;
    if (f == Format::csv) {
        out += "mode,model,seq_len,batch_size,threads,steps_per_update,dtype,op,ms_per_step,share,gflops,"
               "gbytes_per_s\n";
        for (const ProfileRow& row : r.rows)
            out += fmt::format("{},{},{},{},{},{},{},{},{:.4f},{:.5f},{:.2f},{:.2f}\n", r.point.mode,
                               r.point.model, r.point.seq_len, r.point.batch_size, r.point.threads,
                               r.point.steps_per_update, ops::precision_name(r.point.dtype), row.op,
                               row.ms_per_step, row.share, row.gflops, row.gbytes_per_s);
        return out;
    }
    const std::string title = fmt::format("profile: {}: {:.2f} ms/step", point_label(r.point), r.step_ms);
    if (f == Format::md) {
        out += "**";
        out += title;
        out += "**\n\n| op | ms/step | share | GFLOP/s | GB/s |\n|---|---:|---:|---:|---:|\n";
        for (const ProfileRow& row : r.rows)
            out += fmt::format("| {} | {:.3f} | {:.1f}% | {:.1f} | {:.1f} |\n", row.op,
                               row.ms_per_step, 100 * row.share, row.gflops, row.gbytes_per_s);
        return out + "\n";
    }
    out += title;
    out += "\n";
    out += fmt::format("  {:<26} {:>9} {:>7} {:>9} {:>8}\n", "op", "ms/step", "share", "GFLOP/s",
                       "GB/s");
    for (const ProfileRow& row : r.rows)
        out += fmt::format("  {:<26} {:>9.3f} {:>6.1f}% {:>9.1f} {:>8.1f}\n", row.op,
                           row.ms_per_step, 100 * row.share, row.gflops, row.gbytes_per_s);
    return out;
}

std::string profile_svg(const std::vector<ProfileResult>& profiles) {
    constexpr double W = 900, left = 200, right = 860, bar = 16, gap = 4, head = 44;
    double height = 20;
    for (const auto& p : profiles)
        height += head + (bar + gap) * static_cast<double>(p.rows.size()) + 20;
    std::string svg = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} "
        "{:.0f}\" "
        "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        W, height, W, height);
    double y = 20;
    for (size_t k = 0; k < profiles.size(); ++k) {
        const ProfileResult& p = profiles[k];
        svg += fmt::format(
            "<text x=\"10\" y=\"{:.1f}\" font-size=\"15\" font-weight=\"bold\">{}: {:.2f} ms per step "
            "(share of step time)</text>\n",
            y + 16, escape(point_label(p.point)), p.step_ms);
        y += head;
        double maxshare = 0;
        for (const auto& row : p.rows) maxshare = std::max(maxshare, row.share);
        const double scale = maxshare > 0 ? (right - left - 240) / maxshare : 0;
        for (const auto& row : p.rows) {
            const bool is_gemm = row.op.starts_with("gemm");
            svg += fmt::format(
                "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"12\">{}</text>\n",
                left - 6, y + bar - 4, escape(row.op));
            svg += fmt::format(
                "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n",
                left, y, std::max(0.5, row.share * scale), bar, is_gemm ? "#0072b2" : "#e69f00");
            svg += fmt::format(
                "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{:.1f}%  {:.1f} GFLOP/s  "
                "{:.1f} GB/s</text>\n",
                left + row.share * scale + 6, y + bar - 4, 100 * row.share, row.gflops,
                row.gbytes_per_s);
            y += bar + gap;
        }
        y += 20;
    }
    return svg + "</svg>\n";
}

nlohmann::json build_info_with_gemm() {
    nlohmann::json b = sysinfo::build_info();
    const dnnl_version_t* v = dnnl_version();
    b["gemm_library"] = fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
    b["gemm_config"] =
        fmt::format("dnnl_sgemm, {} runtime, max ISA {}", dnnl_runtime2str(v->cpu_runtime),
                    dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()));
    // double precision (finite-difference tests only) goes to OpenBLAS
    b["dgemm_library"] = fmt::format("{} (core {})", openblas_get_config(),
                                     openblas_get_corename());
    b["kernels_isa"] = ops::kernels().name;  // our own float kernels' path (ops/kernels.hpp)
    // what the CPU multiplies natively: a CPU bf16 figure without bf16 units is emulated, an int8
    // one without VNNI/AMX is not int8's speed (the warnings say so on stderr; the report keeps
    // it). The CPU's, also in a --device=cuda report.
    b["cpu_native_precisions"] = ops::native_precisions();
    b["cpu_bf16_emulated"] = !ops::bf16_native();
    b["cpu_int8_dot_product_units"] = ops::int8_native();
    return b;
}

nlohmann::json process_info(double wall_seconds) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    const double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                       1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    // the points' resets of the peak (sysinfo::reset_peak_rss) reset ru_maxrss too
    return {{"max_rss_mb", std::max(static_cast<double>(u.ru_maxrss) / 1024.0, sysinfo::process_peak_rss_mb())},
            {"cpu_seconds", cpu},
            {"cpu_percent", wall_seconds > 0 ? 100.0 * cpu / wall_seconds : 0.0}};
}

nlohmann::json perfzero_summary(const std::vector<nlohmann::json>& points,
                                const std::vector<nlohmann::json>& ceilings,
                                const std::vector<nlohmann::json>& profiles,
                                const nlohmann::json& flags, double wall_seconds) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const auto& p : points) {
        if (!p.contains("sequences_per_second")) continue;
        std::string id = fmt::format(
            "{}/{}/seq{}/b{}/t{}/spu{}", p["mode"].get<std::string>(),
            p["model"].get<std::string>(), p["seq_len"].get<int>(), p["batch_size"].get<int>(),
            p["threads"].get<int>(), p["steps_per_update"].get<int>());
        if (const std::string d = p.value("dtype", "fp32"); d != "fp32") id += fmt::format("/{}", d);
        if (const std::string t = p.value("task", "pretraining"); t != "pretraining") id = t + "/" + id;
        for (const char* m :
             {"sequences_per_second", "tokens_per_second", "padded_tokens_per_second",
              "step_ms_median", "latency_ms_p99", "gflops", "mfu"})
            if (p.contains(m) && !p[m].is_null()) metrics.push_back({{"name", id + "/" + m}, {"value", p[m]}});
    }
    for (const auto& c : ceilings)  // a CPU ceiling per thread count; a device's (device_gemm.hpp)
        metrics.push_back({{"name", c.contains("device") ? fmt::format("ceiling/{}/{}_gemm_gflops",
                                                                       c["device"].get<std::string>(),
                                                                       c.value("dtype", "fp32"))
                                                         : fmt::format("ceiling/t{}/{}_gemm_gflops",
                                                                       c["threads"].get<int>(),
                                                                       c.value("dtype", "fp32"))},
                           {"value", c["gemm_gflops"]}});
    return {{"benchmark_result",
             {{"name", "bertbench.bench"}, {"wall_time", wall_seconds}, {"metrics", metrics}}},
            {"benchmark_info", {{"definitions", definitions()}, {"flags", flags}}},
            {"system_info", sysinfo::system_info()},
            {"process_info", process_info(wall_seconds)},
            {"build_info", build_info_with_gemm()},
            {"points", points},
            {"ceilings", ceilings},
            {"profiles", profiles},
            {"definitions", definitions()},
            {"config", flags}};
}

}  // namespace bertbench::bench
