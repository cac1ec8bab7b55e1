// curves.svg: training loss and eval masked-LM accuracy against samples, as a hand-written SVG
// (two stacked panels with axes, ticks, labels and the target line). No dependencies.
#pragma once
#include <string>
#include <vector>

namespace bertbench::train {

struct CurvePoint {
    double x = 0, y = 0;  // samples, value
};

struct CurvesData {
    std::string title;                 // e.g. "bertbench pretrain: L2 H64, LAMB, batch 32"
    std::vector<CurvePoint> loss;      // training loss per optimizer step
    std::vector<CurvePoint> accuracy;  // eval masked-LM accuracy per evaluation
    double target = -1;                // target accuracy line; < 0 = none
};

// The SVG document (UTF-8 text). Empty series are drawn as empty panels with a note.
std::string render_curves_svg(const CurvesData& data);

// "Nice" tick values covering [lo, hi] (about `count` of them: steps of 1, 2 or 5 x 10^k).
std::vector<double> nice_ticks(double lo, double hi, int count);

}  // namespace bertbench::train
