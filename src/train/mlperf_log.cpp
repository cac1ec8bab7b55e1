// MLPerf log encoding and typed helpers; see mlperf_log.hpp. The encoder reproduces Python's
// json.dumps defaults because mllog.py writes with them and users diff our logs against theirs.
#include "train/mlperf_log.hpp"

#include <chrono>

#include "core/error.hpp"
#include "core/py_json.hpp"

namespace bertbench::train {

namespace {

void dump(std::string& out, const MlJson& v) {
    switch (v.type()) {
        case MlJson::value_t::null: out += "null"; break;
        case MlJson::value_t::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case MlJson::value_t::number_integer: out += std::to_string(v.get<int64_t>()); break;
        case MlJson::value_t::number_unsigned: out += std::to_string(v.get<uint64_t>()); break;
        case MlJson::value_t::number_float: append_py_json_float(out, v.get<double>()); break;
        case MlJson::value_t::string: append_py_json_string(out, v.get_ref<const std::string&>()); break;
        case MlJson::value_t::array: {
            out += '[';
            bool first = true;
            for (const auto& e : v) {
                if (!first) out += ", ";
                first = false;
                dump(out, e);
            }
            out += ']';
            break;
        }
        case MlJson::value_t::object: {
            out += '{';
            bool first = true;
            for (const auto& [k, e] : v.items()) {
                if (!first) out += ", ";
                first = false;
                append_py_json_string(out, k);
                out += ": ";
                dump(out, e);
            }
            out += '}';
            break;
        }
        default: fail("[mlperf_log] cannot encode a JSON value of type {}", v.type_name());
    }
}

int64_t system_ms() {
    // mllog: int(time.time() * 1e3)
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string python_json_dumps(const MlJson& value) {
    std::string out;
    dump(out, value);
    return out;
}

std::string encode_mllog(std::string_view name_space, int64_t time_ms,
                         std::string_view event_type, std::string_view key, const MlJson& value,
                         const MlJson& metadata) {
    MlJson d = MlJson::object();
    d["namespace"] = std::string(name_space);
    d["time_ms"] = time_ms;
    d["event_type"] = std::string(event_type);
    d["key"] = std::string(key);
    d["value"] = value;
    d["metadata"] = metadata;
    return ":::MLLOG " + python_json_dumps(d);
}

std::string relative_source_path(std::string_view file) {
    // A source path as the compiler was given it: absolute under the checkout (BB_SOURCE_ROOT,
    // src/CMakeLists.txt), or relative to the build directory (../src/..., as ccache's base_dir
    // rewrites the files compiled one by one).
    constexpr std::string_view root = BB_SOURCE_ROOT;
    if (file.starts_with(root)) {
        file.remove_prefix(root.size());
    } else {
        while (file.starts_with("../")) file.remove_prefix(3);
    }
    return std::string(file);
}

MlperfLogger::MlperfLogger(Sink sink, Clock clock, std::string name_space)
    : sink_(std::move(sink)), clock_(clock ? std::move(clock) : Clock(system_ms)),
      namespace_(std::move(name_space)) {}

std::unique_ptr<MlperfLogger> MlperfLogger::open(const std::string& path, bool also_stdout) {
    std::shared_ptr<std::FILE> file;
    if (!path.empty()) {
        std::FILE* f = std::fopen(path.c_str(), "a");
        if (!f)
            fail("[mlperf_log] {}: cannot open for appending: {} (hint: check the directory "
                 "exists and is writable)",
                 path, std::strerror(errno));
        file.reset(f, [](std::FILE* p) { std::fclose(p); });
    }
    return std::make_unique<MlperfLogger>([file, also_stdout, path](std::string_view line) {
        if (file) {
            if (std::fwrite(line.data(), 1, line.size(), file.get()) != line.size() ||
                std::fputc('\n', file.get()) == EOF || std::fflush(file.get()) != 0)
                fail("[mlperf_log] {}: write failed: {}", path, std::strerror(errno));
        }
        if (also_stdout) {
            std::fwrite(line.data(), 1, line.size(), stdout);
            std::fputc('\n', stdout);
            std::fflush(stdout);
        }
    });
}

void MlperfLogger::log(std::string_view event_type, std::string_view key, const MlJson& value,
                       const MlJson& metadata, const Loc& loc, int64_t time_ms) {
    if (!enabled_) return;
    MlJson md = MlJson::object();
    md["file"] = relative_source_path(loc.file_name());
    md["lineno"] = static_cast<int64_t>(loc.line());
    if (!metadata.is_null()) {
        if (!metadata.is_object())
            fail("[mlperf_log] key {}: metadata must be a JSON object, got {}", key,
                 metadata.type_name());
        for (const auto& [k, v] : metadata.items()) md[k] = v;  // caller's fields override
    }
    std::lock_guard lock(mutex_);
    sink_(encode_mllog(namespace_, time_ms >= 0 ? time_ms : clock_(), event_type, key, value, md));
}

void MlperfLogger::event(std::string_view key, const MlJson& value, const MlJson& metadata,
                         Loc loc) {
    log("POINT_IN_TIME", key, value, metadata, loc);
}
void MlperfLogger::start(std::string_view key, const MlJson& value, const MlJson& metadata,
                         Loc loc) {
    log("INTERVAL_START", key, value, metadata, loc);
}
void MlperfLogger::end(std::string_view key, const MlJson& value, const MlJson& metadata,
                       Loc loc) {
    log("INTERVAL_END", key, value, metadata, loc);
}

void MlperfLogger::submission_info(std::string_view org, std::string_view platform,
                                   std::string_view division, std::string_view status,
                                   std::string_view benchmark, Loc loc) {
    if (division != "closed" && division != "open")
        fail("[mlperf_log] submission_division: expected \"closed\" or \"open\", got \"{}\"",
             division);
    event("submission_benchmark", std::string(benchmark), MlJson::object(), loc);
    event("submission_org", std::string(org), MlJson::object(), loc);
    event("submission_division", std::string(division), MlJson::object(), loc);
    event("submission_status", std::string(status), MlJson::object(), loc);
    event("submission_platform", std::string(platform), MlJson::object(), loc);
}

void MlperfLogger::cache_clear(bool value, Loc loc) {
    event("cache_clear", value, MlJson::object(), loc);
}
void MlperfLogger::init_start(int64_t time_ms, Loc loc) {
    log("INTERVAL_START", "init_start", nullptr, MlJson::object(), loc, time_ms);
}
void MlperfLogger::init_stop(Loc loc) { end("init_stop", nullptr, MlJson::object(), loc); }
void MlperfLogger::run_start(Loc loc) {
    start("run_start", nullptr, MlJson::object(), loc);
    run_open_ = true;
}
void MlperfLogger::run_stop(bool success, Loc loc) {
    end("run_stop", nullptr, MlJson{{"status", success ? "success" : "aborted"}}, loc);
    run_open_ = false;
}
void MlperfLogger::close_aborted(Loc loc) {
    if (!run_open_) return;
    if (open_eval_ >= 0) eval_stop(open_eval_, loc);
    if (open_block_ >= 0) block_stop(open_block_, loc);
    run_stop(false, loc);
}
void MlperfLogger::block_start(int64_t first_epoch_num, int64_t epoch_count, Loc loc) {
    if (epoch_count <= 0)
        fail("[mlperf_log] block_start: epoch_count expected > 0 samples, got {}", epoch_count);
    start("block_start", nullptr,
          MlJson{{"first_epoch_num", first_epoch_num}, {"epoch_count", epoch_count},
                 {"samples_count", first_epoch_num}},
          loc);
    open_block_ = first_epoch_num;
}
void MlperfLogger::block_stop(int64_t first_epoch_num, Loc loc) {
    end("block_stop", nullptr, MlJson{{"first_epoch_num", first_epoch_num}}, loc);
    open_block_ = -1;
}
void MlperfLogger::eval_start(int64_t epoch_num, Loc loc) {
    start("eval_start", nullptr, MlJson{{"epoch_num", epoch_num}}, loc);
    open_eval_ = epoch_num;
}
void MlperfLogger::eval_stop(int64_t epoch_num, Loc loc) {
    end("eval_stop", nullptr, MlJson{{"epoch_num", epoch_num}}, loc);
    open_eval_ = -1;
}
void MlperfLogger::eval_accuracy(double accuracy, int64_t epoch_num, Loc loc) {
    // BERT's epoch_num is samples trained (closed_bert.yaml requires it); samples_count says so
    // in the key newer compliance rules also accept (training_5.0.0/common.yaml).
    event("eval_accuracy", accuracy, MlJson{{"epoch_num", epoch_num}, {"samples_count", epoch_num}},
          loc);
}
void MlperfLogger::seed(int64_t value, Loc loc) { event("seed", value, MlJson::object(), loc); }

MlJson MlperfLogger::run_params(const BertRunParams& p, const MlJson& logged, Loc loc) {
    if (p.gradient_accumulation_steps <= 0)
        fail("[mlperf_log] gradient_accumulation_steps: expected > 0, got {}",
             p.gradient_accumulation_steps);
    const MlJson now = {{"global_batch_size", p.global_batch_size},
                        {"gradient_accumulation_steps", p.gradient_accumulation_steps},
                        {"number_of_ranks", p.number_of_ranks},
                        {"opt_name", p.opt_name},
                        {"opt_base_learning_rate", p.opt_base_learning_rate},
                        {"opt_lamb_epsilon", p.opt_lamb_epsilon},
                        {"opt_learning_rate_training_steps", p.opt_learning_rate_training_steps},
                        {"opt_learning_rate_warmup_steps", p.opt_learning_rate_warmup_steps},
                        {"num_warmup_steps", p.num_warmup_steps},
                        {"start_warmup_step", p.start_warmup_step},
                        {"opt_lamb_beta_1", p.opt_lamb_beta_1},
                        {"opt_lamb_beta_2", p.opt_lamb_beta_2},
                        {"opt_lamb_weight_decay_rate", p.opt_lamb_weight_decay_rate},
                        {"opt_lamb_learning_rate_decay_poly_power", p.opt_lamb_learning_rate_decay_poly_power},
                        {"max_sequence_length", p.max_sequence_length},
                        {"seed", p.seed},
                        {"train_samples", p.train_samples},
                        {"eval_samples", p.eval_samples}};
    for (const auto& [key, value] : now.items()) {
        const auto it = logged.find(key);
        if (it == logged.end() || *it != value) event(key, value, MlJson::object(), loc);
    }
    return now;
}

void MlperfLogger::resumed(int64_t samples, int64_t step, Loc loc) {
    event("bertbench_resume", samples, MlJson{{"step", step}}, loc);
}

}  // namespace bertbench::train
