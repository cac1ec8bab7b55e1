// dllogger's JSON stream for --json-summary (see dllogger.hpp), from the run's own logs.
#include "cli/dllogger.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "core/py_json.hpp"
#include "model/checkpoint.hpp"
#include "train/mlperf_log.hpp"  // python_json_dumps, json.dumps' text

namespace bertbench::cli {
namespace {

namespace fs = std::filesystem;
using Json = train::MlJson;  // insertion order = dllogger's key order

// The lines of one summary, each stamped when it is added.
class DlloggerText {
public:
    void log(const Json& step, const Json& data) {
        const Stamp now = stamp();
        line({{"timestamp", now.timestamp}, {"datetime", now.datetime}, {"elapsedtime", now.elapsed},
              {"type", "LOG"}, {"step", step}, {"data", data}});
    }
    // dllogger.metadata(metric, {"unit": unit}) (null for no unit), in its key order
    void metadata(const char* metric, const char* unit) {
        const Stamp now = stamp();
        line({{"timestamp", now.timestamp}, {"elapsedtime", now.elapsed}, {"datetime", now.datetime},
              {"type", "METADATA"}, {"metric", metric},
              {"metadata", Json{{"unit", unit ? Json(unit) : Json(nullptr)}}}});
    }
    void parameter(const char* key, const Json& value) { log("PARAMETER", Json{{key, value}}); }
    void write(const std::string& path) const {
        const fs::path dir = fs::path(path).parent_path();
        std::error_code ec;
        if (!dir.empty()) fs::create_directories(dir, ec);
        if (ec) fail("--json-summary={}: cannot create its directory: {}", path, ec.message());
        write_file_atomic(path, text_);
        log::info("wrote {} (dllogger's JSON stream: --json-summary)", path);
    }

private:
    // One "DLLL {...}" line, its keys in the order given (json.dumps of the backend's dict)
    void line(std::initializer_list<std::pair<const char*, Json>> fields) {
        Json j = Json::object();
        for (const auto& [key, value] : fields) j[key] = value;
        text_ += "DLLL " + train::python_json_dumps(j) + "\n";
    }
    struct Stamp {
        std::string timestamp, datetime, elapsed;  // str(timestamp.timestamp()), str(timestamp), str(elapsed)
    };
    Stamp stamp() const {
        const auto now = std::chrono::system_clock::now();
        const double t = std::chrono::duration<double>(now.time_since_epoch()).count();
        const std::time_t secs = std::chrono::system_clock::to_time_t(now);
        std::tm tm{};
        localtime_r(&secs, &tm);
        char date[32];
        std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
        const auto micros = static_cast<int64_t>((t - std::floor(t)) * 1e6);
        return {py_float_repr(t), fmt::format("{}.{:06d}", date, micros), py_float_repr(t - start_)};
    }
    double start_ = std::chrono::duration<double>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
    std::string text_;
};

// A JSON file the run wrote in its output directory; null when it is not there.
nlohmann::json read_output(const std::string& dir, const char* name) {
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return nullptr;
    return json_safe::parse(read_file(path), path, "the run's own JSON output");
}

double number(const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number()
               ? j[key].get<double>()
               : std::numeric_limits<double>::quiet_NaN();
}

// NVIDIA's training_sequences_per_second: the sequences of every update this process ran (its
// warm-up included) over its raw_train_time (this process's training loop, checkpoints and
// evaluations inside it): null where the process ran no update (a rerun of a stopped run).
Json all_steps_rate(const nlohmann::json& results) {
    const double samples = number(results, "segment_samples"), wall = number(results, "segment_wall_time_s");
    return samples > 0 && wall > 0 ? Json(samples / wall) : Json(nullptr);
}

// The header entries both scripts log: the effective configuration and the seed.
void log_config(DlloggerText& d, const DlloggerRun& run) {
    d.parameter("Config", Json::array({run.config.dump()}));
    d.parameter("SEED", run.seed);
}

// train_log.jsonl's lines (one per update).
std::vector<nlohmann::json> train_log(const DlloggerRun& run) {
    std::ifstream in(fs::path(run.output_dir) / "train_log.jsonl");
    std::vector<nlohmann::json> lines;
    for (std::string text; std::getline(in, text);)
        if (!text.empty())
            lines.push_back(json_safe::parse(text, run.output_dir + "/train_log.jsonl",
                                             "one JSON object per line"));
    return lines;
}

// The training log's loss entries, every log_freq updates, as run_pretraining.py logs them:
// average_loss over the updates since the last entry and step_loss; the last update gets
// {"final_loss": ...} instead. Returns the final loss (NaN without training lines).
double log_pretrain_losses(DlloggerText& d, const DlloggerRun& run) {
    const int64_t every = run.log_freq >= 1 ? static_cast<int64_t>(run.log_freq) : 1;
    const std::vector<nlohmann::json> lines = train_log(run);
    double sum = 0, final_loss = std::numeric_limits<double>::quiet_NaN();
    int64_t n = 0;
    for (size_t k = 0; k < lines.size(); ++k) {
        const int64_t update = lines[k].value("update", int64_t{0});
        const double loss = number(lines[k], "loss");
        sum += loss, ++n;
        const Json step = Json::array({0, update});  // [epoch, global_step]
        const bool last = k + 1 == lines.size();
        if (last) {
            final_loss = sum / n;
            d.log(step, Json{{"final_loss", final_loss}});
        } else if (update % every == 0) {
            d.log(step, Json{{"average_loss", sum / n}, {"step_loss", loss},
                             {"learning_rate", number(lines[k], "learning_rate")}});
            sum = 0, n = 0;
        }
        if (run.checkpoint_every > 0 && (last || update % run.checkpoint_every == 0))
            d.parameter("checkpoint_step", update);
    }
    return final_loss;
}

// run_squad.py's: it logs {"step_loss", "learning_rate"} at [epoch, global_step] after each
// micro-batch whose index within its epoch is a multiple of --log_freq (so the first of every
// epoch), the loss divided by K (--gradient_accumulation_steps). Here one entry per update in
// which such a micro-batch falls, with the update's mean loss / K (NVIDIA's: that micro-batch's
// / K). Returns the final loss, the last update's mean / K (NaN without training lines).
double log_squad_losses(DlloggerText& d, const DlloggerRun& run) {
    const int64_t every = run.log_freq >= 1 ? static_cast<int64_t>(run.log_freq) : 1;
    const int64_t k_acc = std::max<int64_t>(run.squad_accumulation, 1);
    const int64_t per_epoch = run.squad_updates_per_epoch;
    double final_loss = std::numeric_limits<double>::quiet_NaN();
    for (const nlohmann::json& l : train_log(run)) {
        const int64_t update = l.value("update", int64_t{0});
        const int64_t epoch = per_epoch > 0 ? (update - 1) / per_epoch : 0;
        const int64_t first = (per_epoch > 0 ? (update - 1) % per_epoch : update - 1) * k_acc;
        final_loss = number(l, "loss") / static_cast<double>(k_acc);
        // a multiple of `every` among the micro-batch indices first .. first + K - 1
        if ((first + every - 1) / every * every <= first + k_acc - 1)
            d.log(Json::array({epoch, update}),
                  Json{{"step_loss", final_loss}, {"learning_rate", number(l, "learning_rate")}});
    }
    return final_loss;
}

}  // namespace

void check_dllogger_path(const std::string& path, const std::vector<std::string>& inputs) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        fail("--json-summary={}: is a directory, expected a file name (dllogger's JSON lines, "
             "e.g. results/dllogger.json)", path);
    // Written at the end, its directories made then: checked now rather than after the run
    // (NVIDIA's dllogger opens the file at start-up)
    check_output_file_writable(path, "--json-summary", true);
    // the inputs' comma lists, globs and checkpoints' files, as the run will read them
    check_output_not_input(path, "--json-summary", model::files_read(inputs), "file");
}

void write_pretrain_dllogger(const std::string& path, const DlloggerRun& run) {
    DlloggerText d;
    d.metadata("e2e_train_time", "s");  // run_pretraining.py's, after dllogger.init
    d.metadata("training_sequences_per_second", "sequences/s");
    d.metadata("final_loss", nullptr);
    d.metadata("raw_train_time", "s");
    log_config(d, run);
    d.parameter("train_start", true);
    d.parameter("batch_size_per_gpu", run.batch_size_per_gpu);
    d.parameter("learning_rate", run.learning_rate);
    const double final_loss = log_pretrain_losses(d, run);
    const nlohmann::json res = read_output(run.output_dir, "results.json");
    // NVIDIA's e2e_train_time runs from before its set-up to the end, its raw_train_time from the
    // first batch, both in this process: here its initialisation plus its part of the run, and
    // that part (run_start to run_stop).
    const double wall = number(res, "segment_wall_time_s"), init = number(res, "initialization_s");
    d.log(Json::array(), Json{{"e2e_train_time", std::isfinite(init) ? init + wall : wall},
                              {"training_sequences_per_second", all_steps_rate(res)},
                              {"final_loss", final_loss},
                              {"raw_train_time", wall}});
    d.write(path);
}

void write_squad_dllogger(const std::string& path, const DlloggerRun& run, bool trained,
                          bool predicted, bool scored) {
    DlloggerText d;
    d.metadata("e2e_train_time", "s");  // run_squad.py's, after dllogger.init
    d.metadata("training_sequences_per_second", "sequences/s");
    d.metadata("final_loss", nullptr);
    d.metadata("e2e_inference_time", "s");
    d.metadata("inference_sequences_per_second", "sequences/s");
    d.metadata("exact_match", nullptr);
    d.metadata("F1", nullptr);
    log_config(d, run);
    if (run.squad_weights >= 0) {  // its torch.load of --init_checkpoint
        d.parameter("loading_checkpoint", true);
        d.parameter("loaded_checkpoint", true);
        d.parameter("model_weights_num", run.squad_weights);
    }
    Json train_summary;  // logged at the end, after the prediction's entries, as run_squad.py does
    if (trained) {
        d.parameter("train_start", true);
        d.parameter("training_samples", run.squad_train_examples);
        d.parameter("training_features", run.squad_train_features);
        d.parameter("train_batch_size", run.batch_size_per_gpu);
        d.parameter("steps", run.squad_steps);
        const double final_loss = log_squad_losses(d, run);
        const nlohmann::json res = read_output(run.output_dir, "results.json");
        const double wall = number(res, "segment_wall_time_s");  // this process's, as its time_to_train
        const Json rate = !(wall > 0)                ? all_steps_rate(res)
                          : run.squad_max_steps > 0   ? Json(number(res, "global_batch_size") * run.squad_max_steps / wall)
                          : run.squad_max_steps == -1 ? Json(static_cast<double>(run.squad_train_features) *
                                                             run.squad_epochs / wall)
                                                      : all_steps_rate(res);
        train_summary = Json{{"e2e_train_time", wall},
                             {"training_sequences_per_second", rate},
                             {"final_loss", final_loss}};
    }
    if (predicted) {
        d.parameter("infer_start", true);
        d.parameter("eval_samples", run.squad_eval_examples);
        d.parameter("eval_features", run.squad_eval_features);
        d.parameter("predict_batch_size", run.squad_predict_batch_size);
        d.parameter("eval_start", true);
        // before each batch, when the results so far are a multiple of 1000
        const int64_t batch = std::max<int64_t>(run.squad_predict_batch_size, 1);
        for (int64_t n = 0; n < run.squad_eval_features; n += batch)
            if (n % 1000 == 0) d.parameter("sample_number", n);
    }
    if (trained) d.log(Json::array(), train_summary);
    if (predicted) {
        const nlohmann::json speed = read_output(run.output_dir, "predict_speed.json");
        if (!speed.value("sequences_per_second", nlohmann::json()).is_null()) {  // null: no feature was timed
            const double sps = number(speed, "sequences_per_second");
            d.log(Json::array(), Json{{"e2e_inference_time", number(speed, "sequences") / sps},
                                      {"inference_sequences_per_second", sps}});
        }
    }
    if (const nlohmann::json m = scored ? read_output(run.output_dir, "eval_results.json") : nullptr;
        !m.is_null()) {
        const double em = m.contains("exact_match") ? number(m, "exact_match") : number(m, "exact");
        d.log(Json::array(), Json{{"exact_match", em}, {"F1", number(m, "f1")}});
    }
    d.write(path);
}

}  // namespace bertbench::cli
