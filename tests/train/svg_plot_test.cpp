// curves.svg rendering (train/svg_plot.hpp): well-formed SVG with both series, axis labels and the
// target line; "nice" ticks cover the range with 1/2/5 x 10^k steps.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "train/svg_plot.hpp"

namespace bertbench::train {
namespace {

size_t count(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

TEST(SvgPlot, NiceTicksCoverRange) {
    const auto t = nice_ticks(0, 9300, 8);
    ASSERT_GE(t.size(), 2u);
    EXPECT_LE(t.front(), 0.0);
    EXPECT_GE(t.back(), 9300.0);
    const double step = t[1] - t[0];
    EXPECT_DOUBLE_EQ(step, 2000.0);
    const auto u = nice_ticks(0.31, 0.74, 6);
    EXPECT_LE(u.front(), 0.31);
    EXPECT_GE(u.back(), 0.74);
    EXPECT_NEAR(u[1] - u[0], 0.1, 1e-12);
}

TEST(SvgPlot, RendersBothSeriesAxesAndTarget) {
    CurvesData d;
    d.title = "a <title> & more";
    for (int i = 1; i <= 100; ++i) d.loss.push_back({i * 32.0, 11.0 - std::log(i)});
    d.accuracy = {{800, 0.1}, {1600, 0.35}, {3200, 0.61}};
    d.target = 0.6;
    const std::string svg = render_curves_svg(d);
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
    EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
    EXPECT_EQ(count(svg, "<polyline"), 2u);
    EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
    EXPECT_NE(svg.find("training loss"), std::string::npos);
    EXPECT_NE(svg.find("eval masked-LM accuracy"), std::string::npos);
    EXPECT_NE(svg.find("samples (sequences trained)"), std::string::npos);
    EXPECT_NE(svg.find("target 0.600"), std::string::npos);
    EXPECT_EQ(svg.find("nan"), std::string::npos);
    EXPECT_EQ(count(svg, "<circle"), 3u);  // markers on the 3 evals; none on 100 loss points
}

TEST(SvgPlot, EmptySeriesSayNoData) {
    const std::string svg = render_curves_svg(CurvesData{});
    EXPECT_EQ(count(svg, "no data"), 2u);
    EXPECT_EQ(svg.find("nan"), std::string::npos);
    EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace bertbench::train
