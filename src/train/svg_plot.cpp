// Hand-written SVG line charts for curves.svg (loss and eval accuracy against samples).
#include "train/svg_plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace bertbench::train {
namespace {

constexpr double kWidth = 860, kPanelH = 300, kLeft = 80, kRight = 30, kTop = 50, kGap = 70;

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string tick_label(double v, double step) {
    if (std::fabs(v) < 1e-12 * std::max(1.0, step)) return "0";
    if (std::fabs(v) >= 1e6) return fmt::format("{:.3g}M", v / 1e6);
    if (std::fabs(v) >= 1e4) return fmt::format("{:g}k", v / 1e3);
    const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
    return fmt::format("{:.{}f}", v, decimals);
}

struct Range {
    double lo, hi;
};

Range pad_range(double lo, double hi) {
    if (!(hi > lo)) {
        const double d = std::max(std::fabs(lo) * 0.1, 1e-3);
        return {lo - d, hi + d};
    }
    return {lo, hi};
}

// One panel: frame, grid, ticks, labels, one polyline (+ markers) and an optional target line.
void panel(std::string& svg, double top, const std::string& ylabel, const std::string& color,
           const std::vector<CurvePoint>& pts, Range xr, double target, bool markers,
           bool from_zero) {
    const double x0 = kLeft, x1 = kWidth - kRight, y0 = top, y1 = top + kPanelH;
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"white\" "
                       "stroke=\"#333\"/>\n", x0, y0, x1 - x0, y1 - y0);
    double lo = 1e300, hi = -1e300;
    for (const auto& p : pts)
        if (std::isfinite(p.y)) lo = std::min(lo, p.y), hi = std::max(hi, p.y);
    if (target >= 0) lo = std::min(lo, target), hi = std::max(hi, target);
    if (lo > hi) lo = 0, hi = 1;
    if (from_zero) lo = std::min(lo, 0.0);  // accuracies: show the distance from 0
    const std::vector<double> yt = nice_ticks(pad_range(lo, hi).lo, pad_range(lo, hi).hi, 6);
    const Range yr{yt.front(), yt.back()};
    const auto sx = [&](double x) { return x0 + (x - xr.lo) / (xr.hi - xr.lo) * (x1 - x0); };
    const auto sy = [&](double y) { return y1 - (y - yr.lo) / (yr.hi - yr.lo) * (y1 - y0); };
    const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
    for (double v : yt) {
        svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                           "stroke=\"#ddd\"/>\n", x0, sy(v), x1, sy(v));
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"12\">"
                           "{}</text>\n", x0 - 6, sy(v) + 4, tick_label(v, ystep));
    }
    const std::vector<double> xt = nice_ticks(xr.lo, xr.hi, 8);
    const double xstep = xt.size() > 1 ? xt[1] - xt[0] : 1;
    for (double v : xt) {
        if (v < xr.lo - 1e-9 || v > xr.hi + 1e-9) continue;
        svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                           "stroke=\"#eee\"/>\n", sx(v), y0, sx(v), y1);
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
                           "font-size=\"12\">{}</text>\n", sx(v), y1 + 16, tick_label(v, xstep));
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"13\">"
                       "samples (sequences trained)</text>\n", (x0 + x1) / 2, y1 + 36);
    svg += fmt::format("<text transform=\"translate({:.1f},{:.1f}) rotate(-90)\" "
                       "text-anchor=\"middle\" font-size=\"13\">{}</text>\n", x0 - 56,
                       (y0 + y1) / 2, escape(ylabel));
    if (target >= 0) {
        svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
                           "stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n", x0, sy(target), x1,
                           sy(target));
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"12\" "
                           "fill=\"#c00\">target {:.3f}</text>\n", x1 - 4, sy(target) - 5, target);
    }
    if (pts.empty()) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
                           "font-size=\"14\" fill=\"#888\">no data</text>\n", (x0 + x1) / 2,
                           (y0 + y1) / 2);
        return;
    }
    std::string path;
    for (const auto& p : pts) {
        if (!std::isfinite(p.y)) continue;
        path += fmt::format("{:.1f},{:.1f} ", sx(p.x), sy(p.y));
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" "
                       "points=\"{}\"/>\n", color, path);
    if (markers)
        for (const auto& p : pts)
            if (std::isfinite(p.y))
                svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                                   sx(p.x), sy(p.y), color);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
    if (!(hi > lo)) hi = lo + 1;
    const double raw = (hi - lo) / std::max(1, count);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    std::vector<double> out;
    const double first = std::floor(lo / step) * step, last = std::ceil(hi / step) * step;
    for (int i = 0; first + i * step <= last + step * 1e-9 && i < 1000; ++i)
        out.push_back(first + i * step);
    if (out.size() < 2) out.push_back(first + step);
    return out;
}

std::string render_curves_svg(const CurvesData& data) {
    const double height = kTop + 2 * kPanelH + kGap + 50;
    std::string svg = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
        "font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n",
        kWidth, height, kWidth, height, kWidth / 2, escape(data.title));
    double xmax = 0;
    for (const auto& p : data.loss) xmax = std::max(xmax, p.x);
    for (const auto& p : data.accuracy) xmax = std::max(xmax, p.x);
    const std::vector<double> xt = nice_ticks(0, std::max(xmax, 1.0), 8);
    const Range xr{0, xt.back()};
    panel(svg, kTop, "training loss (MLM + NSP)", "#1f77b4", data.loss, xr, -1,
          data.loss.size() <= 60, false);
    panel(svg, kTop + kPanelH + kGap, "eval masked-LM accuracy", "#2ca02c", data.accuracy, xr,
          data.target, true, true);
    svg += "</svg>\n";
    return svg;
}

}  // namespace bertbench::train
