// The checkpoint side of the training loop (loop.hpp): names and discovery, writing and pruning,
// and resuming (the flags compared with the checkpoint's), with every number a checkpoint holds checked against what the run can have
// reached before any of it is used.
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/error.hpp"
#include "core/flags.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "model/checkpoint.hpp"
#include "train/data_parallel.hpp"
#include "train/loop.hpp"

namespace bertbench::train {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The step of "model.ckpt-<step>.safetensors"; -1 for other names. A step that does not fit in
// int64 is an error naming the file (a stray file would otherwise win or crash the resume).
int64_t checkpoint_step(const fs::path& file) {
    const std::string name = file.filename().string();
    if (name.rfind("model.ckpt-", 0) != 0 || !name.ends_with(".safetensors")) return -1;
    const std::string num = name.substr(11, name.size() - 11 - 12);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) return -1;
    int64_t step = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), step);
    if (ec != std::errc() || end != num.data() + num.size())
        fail("{}: expected a checkpoint step that fits in 64 bits, got {} (not a checkpoint "
             "bertbench wrote; hint: move it out of --output_dir)", file.string(), num);
    return step;
}

}  // namespace

int64_t saved_int(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& why) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    const auto bad = [&](const std::string& got) {
        fail("\"{}\": expected an integer in [{}, {}]{}, got {}", key, lo, hi,
             why.empty() ? "" : " (" + why + ")", got);
    };
    if (it == j.end()) bad("none");
    // A float is refused, not truncated: 1e300 would not fit, and a count is never fractional.
    if (!it->is_number_integer()) bad(json_safe::brief(*it));
    if (it->is_number_unsigned() &&
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        bad(json_safe::brief(*it));
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) bad(std::to_string(v));
    return v;
}

double saved_real(const json& j, const char* key, double lo, double hi, const std::string& why) {
    const auto it = j.is_object() ? j.find(key) : j.end();
    const double v = it != j.end() && it->is_number() ? it->get<double>()
                                                       : std::numeric_limits<double>::quiet_NaN();
    if (!(v >= lo && v <= hi))  // also NaN, and a field that is missing or not a number
        fail("\"{}\": expected {}{}, got {}", key,
             hi == std::numeric_limits<double>::max()
                 ? fmt::format("a finite number >= {}", lo)
                 : fmt::format("a number in [{}, {}]", lo, hi),
             why.empty() ? "" : " (" + why + ")", it == j.end() ? "none" : json_safe::brief(*it));
    return v;
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
    return (fs::path(dir) / fmt::format("{}{}.safetensors", kCheckpointPrefix, step)).string();
}

std::vector<std::string> run_output_names() {
    return {"config.json",     "results.json",     "train_log.jsonl",  "eval_log.jsonl",    "curves.svg",
            "mlperf.log",      "changed_flags.jsonl", "eval_results.txt", "eval_results.json"};
}

std::string latest_checkpoint(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return "";
    int64_t best = -1;
    std::string path;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const int64_t s = checkpoint_step(e.path());
        if (s > best) best = s, path = e.path().string();
    }
    return path;
}

void TrainLoop::load_init_moments(const model::ParamTable& table) {
    const std::string expected =
        "expected the optimizer's moments to carry over (<tensor>/adam_m and /adam_v, as a "
        "bertbench training checkpoint has them)";
    // Checked by format before anything is read: the moments come from our safetensors only
    // (NVIDIA's ckpt_N.pt keeps FusedLAMB's state by parameter index, not read here).
    const model::CheckpointFormat format = model::detect_checkpoint_format(o_.init_checkpoint);
    if (format != model::CheckpointFormat::bertbench)
        fail("--init_checkpoint={}: {}, got a {} (its optimizer state is not read) (hint: bertbench's "
             "own line, pretrain --init_checkpoint=... without the reference's flags, starts from "
             "its weights with fresh moments)",
             o_.init_checkpoint, expected, model::checkpoint_format_name(format));
    const model::CheckpointReader r(o_.init_checkpoint);
    if (!r.has(table.entries().front().name + "/adam_m"))
        fail("--init_checkpoint={}: {}, got none (hint: a checkpoint written by bertbench pretrain)",
             o_.init_checkpoint, expected);
    load_moments(r);
    log::info("optimizer moments from {} (bias correction restarts at update 1)", o_.init_checkpoint);
}

void TrainLoop::load_moments(const model::CheckpointReader& r) {
    const model::ParamTable& table = task_.table();
    const optim::Optimizer& opt = updater_->optimizer();
    backend::modify_on_host(o_.device(), opt.m().data(), opt.m().size(),
                            [&](std::span<float> m) { r.load_table(table, m, "/adam_m"); });
    backend::modify_on_host(o_.device(), opt.v().data(), opt.v().size(),
                            [&](std::span<float> v) { r.load_table(table, v, "/adam_v"); });
}

void TrainLoop::check_command_of(const model::CheckpointReader& r) const {
    // The command named in the checkpoint; before it was, the one its flags belong to
    const auto& md = r.metadata();
    std::string by;
    if (const auto it = md.find("command"); it != md.end()) {
        by = it->second;
    } else if (const auto f = md.find("flags"); f != md.end()) {
        const json flags = json::parse(f->second, nullptr, /*allow_exceptions=*/false);
        if (flags.is_object()) by = flags.contains("train_file") ? "squad" : flags.contains("input_file") ? "pretrain" : "";
    }
    if (!by.empty() && by != o_.command)
        fail("{}: the checkpoint of a bertbench {} run, expected one of bertbench {} to resume in --output_dir={} "
             "(hint: another --output_dir for this run; --init_checkpoint={} starts it from those weights)",
             resume_from_, by, o_.command, o_.output_dir, resume_from_);
}

void TrainLoop::load_or_init() {
    const model::ParamTable& table = task_.table();
    const optim::LrSchedule& sched = o_.schedule;  // validated in setup()
    backend::Backend& be = o_.device();
    try {
        params_ = std::make_unique<backend::Buffer<float>>(be, table.total_floats());
        params_->zero();
        updater_ = std::make_unique<optim::ParameterUpdater>(
            table, o_.optimizer, sched, o_.steps_per_update, o_.clip_mode, o_.clip_norm, be);
        grads_ = std::make_unique<backend::Buffer<float>>(be, o_.do_train ? table.total_floats() : 0);
        grads_->zero();
    } catch (const std::bad_alloc&) {
        fail("out of memory allocating the parameters, optimizer state and gradients ({:.1f} MiB "
             "for {} parameters; they do not depend on the batch) (hint: a smaller model)",
             table.total_floats() * 16.0 / (1 << 20), table.num_parameters());
    }
    if (resume_from_.empty()) {
        // The moments first: a checkpoint without them is refused before its weights are read.
        if (!o_.init_checkpoint.empty() && o_.init_optimizer_moments) load_init_moments(table);
        backend::modify_on_host(be, params_->get(), params_->size(), [&](std::span<float> params) {
            table.initialize(params, static_cast<uint64_t>(o_.seed));
            if (!o_.init_checkpoint.empty())
                model::load_init_checkpoint(o_.init_checkpoint, table, params);  // any format
        });
        return;
    }
    log::info("resuming from {}", resume_from_);
    const model::CheckpointReader r(resume_from_);
    check_command_of(r);
    // Every number in the checkpoint is checked against what this run can have reached before
    // any of it is used (and before the weights are read): a step of 2^62 would overflow
    // step x batch, a cursor or count out of range would index, loop or overflow on. A
    // checkpoint that disagrees with itself (the step in its name) is refused as damaged.
    const std::string damaged =
        "the checkpoint is damaged or not this run's (hint: move it out of --output_dir to resume "
        "from an earlier one, or start a new --output_dir)";
    const auto scalar = [&](const char* name) {
        const std::vector<int64_t> v = r.read_i64(name);
        if (v.size() != 1)
            fail("{}: tensor \"{}\": expected one value, got {}; {}", resume_from_, name,
                 v.size(), damaged);
        return v[0];
    };
    const auto& md = r.metadata();
    const auto get = [&](const char* key) {
        const auto it = md.find(key);
        if (it == md.end())
            fail("{}: __metadata__: expected \"{}\", got none (hint: not a checkpoint written by "
                 "bertbench {})", resume_from_, key, o_.command);
        return json_safe::parse(it->second, fmt::format("{}: __metadata__[\"{}\"]", resume_from_, key),
                                fmt::format("JSON written by bertbench {}", o_.command));
    };
    // The flags first: a changed one (a smaller --train_batch_size, another --steps_per_update)
    // is said as such, not as the run state it makes look damaged. Checkpoints before input_paths
    // existed: the flags' text alone is compared.
    const auto optional = [&](const char* key) { return md.count(key) ? get(key) : json::object(); };
    check_resumed_flags(get("flags"), r.config().to_json_complete(), optional("input_paths"),
                        optional("input_sizes"), optional("input_fingerprints"));
    const int64_t max_step = kMaxRunSamples / o_.train_batch_size;
    const int64_t step = scalar("bertbench/global_step");
    if (step < 0 || step > max_step)
        fail("{}: tensor \"bertbench/global_step\": expected a step in [0, {}] (2^53 sequences "
             "at --train_batch_size={}), got {}; {}",
             resume_from_, max_step, o_.train_batch_size, step, damaged);
    if (const int64_t named = checkpoint_step(resume_from_); named != step)
        fail("{}: tensor \"bertbench/global_step\": expected {} (the step in the file name), "
             "got {}; {}", resume_from_, named, step, damaged);
    // squad's length comes from its training examples, epochs and batch, not a flag of its own
    const bool squad = o_.command == "squad";
    if (o_.do_train && step > o_.num_train_steps)
        fail("{}: tensor \"bertbench/global_step\": expected a step in [0, {}] ({}), got {} (hint: "
             "the run being resumed was longer: its own {} continue it, a new --output_dir starts "
             "another run)",
             resume_from_, o_.num_train_steps,
             squad ? "the updates of this --train_file, --num_train_epochs and --train_batch_size"
                   : "--num_train_steps",
             step, squad ? "--train_file and length flags" : "length flags");
    if (step % o_.steps_per_update != 0)
        fail("{}: tensor \"bertbench/global_step\": expected a multiple of --steps_per_update={} "
             "(checkpoints are written between optimizer updates), got {}: the run being resumed had "
             "another --steps_per_update (hint: its own resumes it; a new --output_dir starts a "
             "different run), or the checkpoint is damaged",
             resume_from_, o_.steps_per_update, step);
    const int64_t updates = scalar("bertbench/update_count");
    if (updates < 0 || updates > step / o_.steps_per_update)
        fail("{}: tensor \"bertbench/update_count\": expected an integer in [0, {}] (the "
             "optimizer updates of {} steps), got {}; {}",
             resume_from_, step / o_.steps_per_update, step, updates, damaged);
    const std::vector<int64_t> shape{2};
    const std::vector<float> powers = r.read_f32("bertbench/beta_powers", &shape);
    for (size_t i = 0; i < 2; ++i)
        if (!(powers[i] >= 0.0f && powers[i] <= 1.0f))  // beta^t with 0 <= beta < 1; also NaN
            fail("{}: tensor \"bertbench/beta_powers\": expected values in [0, 1], got {} at "
                 "index {}; {}", resume_from_, powers[i], i, damaged);
    const int64_t samples = step * o_.train_batch_size;  // <= 2^53: checked above

    backend::modify_on_host(o_.device(), params_->get(), params_->size(),
                            [&](std::span<float> params) { model::load_checkpoint(resume_from_, table, params); });
    load_moments(r);
    updater_->set_global_step(step);
    updater_->optimizer().set_scalars(updates, powers[0], powers[1]);
    // Errors of a metadata value's content, with the file and key in front.
    const auto checked = [&](const char* key, const auto& body) {
        try {
            body();
        } catch (const json::exception& e) {  // a field of the wrong type in the task's state
            fail("{}: __metadata__[\"{}\"]: {} (expected the run state bertbench {} writes); {}",
                 resume_from_, key, e.what(), o_.command, damaged);
        } catch (const Error& e) {
            fail("{}: __metadata__[\"{}\"]: {}; {}", resume_from_, key, e.what(), damaged);
        }
    };
    const json st = get("train_state");
    checked("train_state", [&] {
        state_.skipped_steps = saved_int(st, "skipped_steps", 0, step, "at most the global step");
        state_.elapsed_s = saved_real(st, "elapsed_s", 0, std::numeric_limits<double>::max());
        state_.timed_s = saved_real(st, "timed_s", 0, std::numeric_limits<double>::max());
        state_.timed_samples = saved_int(st, "timed_samples", 0, samples,
                                         "at most global step x train_batch_size");
        state_.timed_tokens = st.contains("timed_tokens")
                                  ? saved_int(st, "timed_tokens", 0, int64_t{1} << 62)
                                  : 0;
        state_.finished = st.at("finished").get<bool>();
        state_.status = st.at("status").get<std::string>();
        task_.restore_state(st, samples);
    });
    if (scaler_.enabled()) {
        if (md.find("loss_scaler") == md.end())
            fail("{}: __metadata__: expected \"loss_scaler\" for --loss_scale={}, got none (the "
                 "checkpoint was written without loss scaling; hint: --allow_changed_flags does "
                 "not apply, start a new --output_dir)",
                 resume_from_, o_.loss_scale);
        // Clean updates and overflows are counts of this run's updates and skipped steps.
        const json ls = get("loss_scaler");
        checked("loss_scaler", [&] { scaler_.restore(ls, step); });
    }
    if (o_.do_train) {
        // Under mpirun the checkpoint holds every rank's cursor; with another rank count the
        // data restarts at the epoch after the last one reached (docs/distributed.md). Every
        // rank's cursor is checked, as any of them can set that epoch.
        const json saved = get("reader_state");
        checked("reader_state", [&] {
            for (const json& c : saved.is_array() ? saved : json::array({saved}))
                if (!c.is_null()) task_.check_data_cursor(c, samples);
        });
        data_cursor_ = dp_->reader_state_for_rank(saved, &first_epoch_);
        std::string other_data;
        if (!data_cursor_.is_null())
            checked("reader_state", [&] { other_data = task_.data_cursor_mismatch(data_cursor_); });
        if (!other_data.empty()) {
            if (!o_.allow_changed_flags)
                fail("{}: __metadata__[\"reader_state\"]: the data order cannot continue with this run's data and "
                     "reader flags: {} (hint: the same data and reader flags resume it; a new --output_dir starts a "
                     "different run; --allow_changed_flags starts the next epoch of the new data)",
                     resume_from_, other_data);
            data_cursor_ = nullptr;
            first_epoch_ = DataParallel::epoch_after(saved);
            if (changed_flags_.is_null()) changed_flags_ = {{"resumed_from", resume_from_}, {"changes", json::array()}};
            changed_flags_["changes"].push_back({{"reader_state", other_data}, {"now_epoch", first_epoch_}});
            if (root_)
                log::warn("--allow_changed_flags: the data order of {} belongs to other data or reader flags ({}): "
                          "the weights and the optimizer state resume, the data starts epoch {} of the new data",
                          resume_from_, other_data, first_epoch_);
        } else if (data_cursor_.is_null() && first_epoch_ > 0 && root_)  // a fact of the job: said once
            log::warn("{} was written by a job with another number of ranks: the weights and the "
                      "optimizer state resume, the data order does not (every rank starts epoch {} "
                      "of its new share; the rest of the interrupted epoch is not seen)",
                      resume_from_, first_epoch_);
    }
    last_saved_step_ = step;
    last_checkpoint_ = resume_from_;
}

void TrainLoop::save_checkpoint(bool final_one) {
    const int64_t step = updater_->global_step();
    if (step == last_saved_step_ && !final_one) return;
    BB_CHECK(is_boundary());  // the gradient accumulator is zero: not part of the state
    const std::string file = checkpoint_path(o_.output_dir, step);
    const double t0 = now_s();
    // Collective under mpirun: every rank's data cursor, and a check that all weights agree.
    const json cursors = dp_->gather_reader_states(o_.do_train ? task_.data_cursor() : json(nullptr));
    dp_->require_same_weights(params_->span(), fmt::format("after step {}", step),
                              "the ranks diverged: a bug, please report it");
    if (!root_) {  // rank 0 writes
        last_saved_step_ = step;
        last_checkpoint_ = file;
        return;
    }
    json st = task_.state();
    st["skipped_steps"] = state_.skipped_steps;
    st["elapsed_s"] = final_wall_s_ >= 0 ? final_wall_s_ : elapsed();  // a last one: when the run stopped
    st["timed_s"] = state_.timed_s;
    st["timed_samples"] = state_.timed_samples;
    st["timed_tokens"] = state_.timed_tokens;
    st["finished"] = state_.finished;
    st["status"] = state_.status;
    const model::ParamTable& table = task_.table();
    model::CheckpointWriter w(file, table);
    // The writer keeps the spans until commit(): host copies where the device's memory is not the host's
    const optim::Optimizer& opt = updater_->optimizer();
    std::vector<float> params_copy, m_copy, v_copy;
    w.add_table(backend::host_view(o_.device(), params_->get(), params_->size(), params_copy));
    w.add_table(backend::host_view(o_.device(), opt.m().data(), opt.m().size(), m_copy), "/adam_m");
    w.add_table(backend::host_view(o_.device(), opt.v().data(), opt.v().size(), v_copy), "/adam_v");
    const int64_t gs = step, uc = updater_->optimizer().update_count();
    w.add_i64("bertbench/global_step", std::span<const int64_t>(&gs, 1));
    w.add_i64("bertbench/update_count", std::span<const int64_t>(&uc, 1));
    const float powers[2] = {updater_->optimizer().beta1_power(),
                             updater_->optimizer().beta2_power()};
    w.add_f32("bertbench/beta_powers", powers);
    w.set_metadata("command", o_.command);
    w.set_metadata("flags", flags_json_.dump());
    w.set_metadata("input_paths", input_paths(flags_json_).dump());
    w.set_metadata("input_sizes", data_file_sizes(task_.data_files()).dump());
    w.set_metadata("input_fingerprints", input_prints().dump());
    w.set_metadata("train_state", st.dump());
    if (scaler_.enabled()) w.set_metadata("loss_scaler", scaler_.state().dump());
    w.set_metadata("reader_state", cursors.dump());
    w.set_metadata("dropout", fmt::format("philox(seed={}, step=global_step)", o_.seed));
    w.commit();
    last_saved_step_ = step;
    last_checkpoint_ = file;
    log::info("saved checkpoint {} ({:.2f} s)", file, now_s() - t0);
    prune_checkpoints();
}

void TrainLoop::prune_checkpoints() {
    if (o_.keep_checkpoint_max <= 0) return;
    std::vector<std::pair<int64_t, std::string>> found;
    for (const auto& e : fs::directory_iterator(o_.output_dir)) {
        const int64_t step = checkpoint_step(e.path());
        if (step >= 0) found.emplace_back(step, e.path().string());
    }
    std::sort(found.begin(), found.end());
    for (size_t i = 0; i + o_.keep_checkpoint_max < found.size(); ++i) {
        std::error_code ec;
        fs::remove(found[i].second, ec);
    }
}

namespace {
// `path` absolute, with its symlinks resolved as far as they exist
fs::path resolved_path(const std::string& path) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    return ec ? fs::absolute(path, ec).lexically_normal() : p;
}
}  // namespace

// Flags that would silently fork a resumed run: each difference from the checkpoint's is named;
// --allow_changed_flags goes on and records them in changed_flags.jsonl and the log. So are the
// model's settings: a bert_config.json edited in place (a dropout, the activation) under the same
// path; its sizes cannot change, as the checkpoint's tensors would not fit.
json input_paths(const json& flags) {
    // The flags that name input files as an absolute path with its symlinks resolved (a glob's
    // pattern kept): ./vocab.txt, vocab.txt and /data/vocab.txt from the run's directory are one
    // file to a resume started elsewhere. The comma lists, each item; the others whole (a file's
    // name may hold a comma).
    static const std::pair<const char*, bool> kPathFlags[] = {
        {"input_file", true}, {"eval_input_file", true}, {"train_file", false},     {"predict_file", false},
        {"vocab_file", false}, {"bert_config_file", false}, {"init_checkpoint", false}};
    json out = json::object();
    for (const auto& [k, list] : kPathFlags) {
        const auto it = flags.find(k);
        if (it == flags.end() || !it->is_string() || it->get<std::string>().empty()) continue;
        const std::string& text = it->get<std::string>();
        std::string joined;
        for (const std::string& item : list ? split_commas(text) : std::vector<std::string>{text}) {
            if (!joined.empty()) joined += ',';
            joined += resolved_path(item).string();
        }
        out[k] = joined;
    }
    return out;
}

json data_file_sizes(const std::vector<std::string>& files) {
    json out = json::object();
    for (const std::string& f : files) {
        const fs::path p = resolved_path(f);
        std::error_code ec;
        const uintmax_t size = fs::file_size(p, ec);
        out[p.string()] = ec ? json(nullptr) : json(size);
    }
    return out;
}

// A resumed run's other global batch on a line whose --train_batch_size is per rank (NVIDIA's,
// NGC's), where another rank count gives the checkpoint's: says so, "" otherwise.
std::string TrainLoop::ranks_hint(const json& old_batch, const json& now_batch) const {
    if (!o_.batch_per_rank || !old_batch.is_number_integer() || !now_batch.is_number_integer()) return "";
    const int64_t ranks = dp_->size(), per_rank = now_batch.get<int64_t>() / ranks, old = old_batch.get<int64_t>();
    if (per_rank < 1 || old % per_rank != 0 || old / per_rank == ranks) return "";
    return fmt::format("the global batch, {} rank(s) x {} per rank; the checkpoint's {} is {} ranks of {}: mpirun "
                       "-np {}; ",
                       ranks, per_rank, old, old / per_rank, per_rank, old / per_rank);
}

json data_file_prints(const std::vector<std::string>& files) {
    std::vector<std::string> resolved;
    for (const std::string& f : files) resolved.push_back(resolved_path(f).string());
    return dist::file_fingerprints(resolved, 4 << 10);
}

const json& TrainLoop::input_prints() {
    if (input_prints_.is_null()) input_prints_ = data_file_prints(task_.data_files());
    return input_prints_;
}

void TrainLoop::check_resumed_flags(const json& old_flags, const json& old_config,
                                    const json& old_paths, const json& old_sizes, const json& old_prints) {
    if (!old_flags.is_object()) return;
    // Two spellings of the same input files are the same flag value.
    const json now_paths = input_paths(flags_json_);
    const auto differs = [&](const std::string& k) {
        if (!old_flags.contains(k) || !flags_json_.contains(k) || old_flags[k] == flags_json_[k]) return false;
        return !(old_paths.is_object() && old_paths.contains(k) && now_paths.contains(k) &&
                 old_paths[k] == now_paths[k]);
    };
    for (const std::string& k : o_.fixed_flags)  // optimizer_variant: no flag, the line's script sets it
        if (differs(k))
            fail("{}: expected {} as in the checkpoint {} being resumed, got {} ({}hint: use "
                 "a new --output_dir for a different run)",
                 k == "optimizer_variant" ? "the optimizer variant (set by the command line's script)" : "--" + k,
                 json_safe::brief(old_flags[k]), resume_from_, json_safe::brief(flags_json_[k]),
                 k == "train_batch_size" ? ranks_hint(old_flags[k], flags_json_[k]) : "");
    json changes = json::array();
    std::string text;
    for (const std::string& k : o_.checked_flags) {
        if (!differs(k)) continue;
        changes.push_back({{"flag", k}, {"checkpoint", old_flags[k]}, {"now", flags_json_[k]}});
        text += fmt::format("{}--{} (checkpoint {}, now {})", text.empty() ? "" : ", ", k,
                            old_flags[k].dump(), flags_json_[k].dump());
    }
    const json config = task_.table().config().to_json_complete();
    for (const auto& [k, now] : config.items()) {
        if (!old_config.contains(k) || old_config[k] == now) continue;
        changes.push_back({{"bert_config", k}, {"checkpoint", old_config[k]}, {"now", now}});
        text += fmt::format("{}bert_config {} (checkpoint {}, now {})", text.empty() ? "" : ", ", k,
                            old_config[k].dump(), now.dump());
    }
    // A data file replaced in place (the cursors index its records): its size, and where the
    // checkpoint has them, the bytes at its ends (not its whole content: every byte at every resume)
    const json now_sizes = old_sizes.is_object() ? data_file_sizes(task_.data_files()) : json::object();
    const auto bytes = [](const json& size) { return size.is_null() ? "unreadable" : size.dump() + " bytes"; };
    for (const auto& [file, now] : now_sizes.items()) {
        if (!old_sizes.contains(file)) continue;
        if (old_sizes[file] != now) {
            changes.push_back({{"data_file", file}, {"checkpoint_bytes", old_sizes[file]}, {"now_bytes", now}});
            text += fmt::format("{}the data file {} (checkpoint {}, now {})", text.empty() ? "" : ", ", file,
                                bytes(old_sizes[file]), bytes(now));
        } else if (old_prints.is_object() && old_prints.contains(file) && old_prints[file] != input_prints()[file]) {
            changes.push_back({{"data_file", file}, {"checkpoint_fingerprint", old_prints[file]},
                               {"now_fingerprint", input_prints()[file]}});
            text += fmt::format("{}the data file {} (the same size, other bytes in its first or last 4 KiB)",
                                text.empty() ? "" : ", ", file);
        }
    }
    if (changes.empty()) return;
    if (!o_.allow_changed_flags)
        fail("{}: resuming with {} flag(s) or file(s) changed from the run being resumed: {} (hint: the same "
             "flags resume it; a new --output_dir starts a different run; --allow_changed_flags "
             "continues with the new values and records the change)",
             resume_from_, changes.size(), text);
    if (root_)  // a fact of the job: said once, not by every rank
        log::warn("--allow_changed_flags: resuming {} with changed flags: {} (recorded in {}/"
                  "changed_flags.jsonl)", resume_from_, text, o_.output_dir);
    changed_flags_ = {{"resumed_from", resume_from_}, {"changes", changes}};  // written by run()
}

}  // namespace bertbench::train
