// Structure-aware resume checkpoints (fuzz/recipe.hpp): a valid checkpoint with hostile state,
// resumed by the real pretraining run. Once per process, run_pretraining trains the tiny model
// (2 layers, H 4, vocab 15, seq 8) for 4 steps on 16 records, checkpointing at step 2 (finished
// false, dynamic loss scaling); that step-2 checkpoint is the template. Each input rewrites it
// with the recipe's choices: the step in the file name (2, or 0, 4, 6, 2^62 ...) and in
// bertbench/global_step, update_count, beta_powers (NaN, -1, 2), a weight or optimizer slot
// dropped, reshaped, retyped or filled with NaN, one field of train_state / reader_state /
// loss_scaler / flags / bert_config replaced by an edge integer, a negative, a real, a string,
// null or a nested value, or removed; sometimes a second, damaged checkpoint with a higher step.
// Then run_pretraining resumes in that directory (to step 4, 2 or 6). Beyond a clean Error: a run
// refused with an Error has written no checkpoint of its own.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "fuzz_util.hpp"
#include "io/example.hpp"
#include "io/safetensors.hpp"
#include "io/tfrecord.hpp"
#include "recipe.hpp"
#include "train/pretrain.hpp"

using namespace bertbench;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kT = 8, kP = 2;

train::PretrainOptions options(const fs::path& dir) {
    train::PretrainOptions o;
    o.bert_config_file = fuzz::tiny_config_file();
    o.input_file = (dir / "data.tfrecord").string();
    o.output_dir = (dir / "run").string();
    o.train_batch_size = 2;
    o.max_seq_length = kT;
    o.max_predictions_per_seq = kP;
    o.num_train_steps = 4;
    o.num_warmup_steps = 1;
    o.save_checkpoints_steps = 2;
    o.keep_checkpoint_max = 0;
    o.threads = 1;
    o.seed = 2;
    o.shuffle_buffer = 4;
    o.loss_scale = "dynamic";
    o.warmup_updates_excluded = 0;
    return o;
}

json flags_of(const train::PretrainOptions& o) {
    return {{"train_batch_size", o.train_batch_size}, {"max_seq_length", o.max_seq_length},
            {"num_train_steps", o.num_train_steps}, {"seed", o.seed},
            {"allow_changed_flags", o.allow_changed_flags}};
}

// 16 valid records of the tiny model's shape.
void write_data(const std::string& path) {
    io::TfRecordWriter w(path);
    for (int i = 0; i < 16; ++i) {
        io::PretrainingRecord r;
        r.input_ids = {2, 5 + i % 7, 6, 3, 7, 8 + i % 5, 3, 0};
        r.input_mask = {1, 1, 1, 1, 1, 1, 1, 0};
        r.segment_ids = {0, 0, 0, 0, 1, 1, 1, 0};
        r.masked_lm_positions = {1, 5};
        r.masked_lm_ids = {5 + i % 3, 9};
        r.masked_lm_weights = {1.0f, 1.0f};
        r.next_sentence_labels = i % 2;
        w.write(io::encode_example(io::pretraining_example(r)));
    }
    w.close();
}

struct Template {
    std::map<std::string, std::string> metadata;
    struct T {
        std::string name;
        io::DType dtype;
        std::vector<int64_t> shape;
        std::string bytes;
    };
    std::vector<T> tensors;
};

const Template& template_checkpoint(const fs::path& dir) {
    static const Template t = [&] {
        write_data((dir / "data.tfrecord").string());
        const train::PretrainOptions o = options(dir);
        if (train::run_pretraining(o, flags_of(o)) != 0) std::abort();
        const io::SafetensorsReader r(train::checkpoint_path(o.output_dir, 2));
        Template out;
        out.metadata = r.metadata();
        for (const io::TensorInfo& i : r.tensors()) {
            const auto b = r.bytes(i);
            out.tensors.push_back({i.name, i.dtype, i.shape,
                                   std::string(reinterpret_cast<const char*>(b.data()), b.size())});
        }
        return out;
    }();
    return t;
}

json hostile_value(fuzz::Recipe& r) {
    switch (r.upto(7)) {
        case 0: return r.hostile_i64();
        case 1: return static_cast<double>(r.hostile_i64()) + 0.5;
        case 2: return "7";
        case 3: return nullptr;
        case 4: return json::array({1, 2});
        case 5: return json::object({{"a", 1}});
        case 6: return r.flip();
        default: return r.hostile_u64();
    }
}

// One field (at the top or one level down) replaced or removed.
std::string damage_json(fuzz::Recipe& r, const std::string& text) {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return text;
    json* target = &j;
    if (target->is_array() && !target->empty()) target = &(*target)[r.upto(target->size() - 1)];
    if (!target->is_object() || target->empty()) return r.flip() ? hostile_value(r).dump() : text;
    auto it = target->begin();
    std::advance(it, static_cast<long>(r.upto(target->size() - 1)));
    if (it->is_object() && !it->empty() && r.flip()) {
        auto in = it->begin();
        std::advance(in, static_cast<long>(r.upto(it->size() - 1)));
        *in = hostile_value(r);
    } else if (r.one_in(4)) {
        target->erase(it);
    } else {
        *it = hostile_value(r);
    }
    return j.dump();
}

int64_t step_of(fuzz::Recipe& r) {
    static constexpr std::array<int64_t, 8> kSteps{2, 2, 2, 0, 4, 6, 1, int64_t{1} << 62};
    return r.one_in(6) ? r.hostile_i64(8) : r.pick(kSteps);
}

void write_checkpoint(fuzz::Recipe& r, const Template& t, const std::string& path) {
    io::SafetensorsWriter w(path);
    for (const auto& [k, v] : t.metadata) {
        if (r.one_in(32)) continue;
        w.set_metadata(k, r.one_in(5) ? damage_json(r, v) : v);
    }
    for (const Template::T& x : t.tensors) {
        std::string bytes = x.bytes;
        std::vector<int64_t> shape = x.shape;
        io::DType dtype = x.dtype;
        if (x.name == "bertbench/global_step" && bytes.size() == 8) {
            const int64_t s = r.one_in(3) ? step_of(r) : 2;
            std::memcpy(bytes.data(), &s, 8);
        } else if (x.name == "bertbench/update_count" && bytes.size() == 8 && r.one_in(4)) {
            const int64_t s = r.hostile_i64(4);
            std::memcpy(bytes.data(), &s, 8);
        } else if (x.name == "bertbench/beta_powers" && r.one_in(4)) {
            static constexpr std::array<float, 5> kPow{NAN, -1.0f, 2.0f, INFINITY, 0.5f};
            const float f = r.pick(kPow);
            std::memcpy(bytes.data() + 4 * r.upto(bytes.size() / 4 - 1), &f, 4);
        } else if (r.one_in(64)) {
            continue;  // dropped
        } else if (r.one_in(64) && !shape.empty() && shape.back() > 0) {
            shape.back() = 1, bytes.resize(bytes.size() / static_cast<size_t>(x.shape.back()));
        } else if (r.one_in(64) && dtype == io::DType::F32) {
            dtype = io::DType::I32;
        } else if (r.one_in(48) && bytes.size() >= 4) {
            const float f = r.flip() ? NAN : 3e38f;
            std::memcpy(bytes.data() + 4 * r.upto(bytes.size() / 4 - 1), &f, 4);
        }
        w.add_copy(x.name, dtype, shape, bytes.data(), bytes.size());
    }
    w.write();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const fs::path dir = [] {
        log::set_level(log::Level::error);
        const fs::path d = fuzz::scratch_dir() / "ckpt";
        fs::create_directories(d);
        return d;
    }();
    const Template& t = template_checkpoint(dir);
    fuzz::Recipe r(data, size);
    train::PretrainOptions o = options(dir);
    fs::remove_all(o.output_dir);
    fs::create_directories(o.output_dir);
    const int64_t named = step_of(r);
    const std::string ours = train::checkpoint_path(o.output_dir, named);
    write_checkpoint(r, t, ours);
    std::string other;
    if (r.one_in(8) && named >= 0 && named < (int64_t{1} << 62)) {  // a later, damaged one beside it: the run must pick and refuse it
        other = train::checkpoint_path(o.output_dir, named + 1 + static_cast<int64_t>(r.upto(4)));
        fuzz::write_file(other, r.bytes(r.upto(256)));
    }
    static constexpr std::array<int64_t, 4> kStop{4, 4, 2, 6};
    o.num_train_steps = r.pick(kStop);
    o.allow_changed_flags = r.flip();
    bool refused = true;
    fuzz::expect_clean([&] {
        (void)train::run_pretraining(o, flags_of(o));
        refused = false;
    });
    if (refused)  // nothing written under a checkpoint's final name
        for (const auto& e : fs::directory_iterator(o.output_dir)) {
            const std::string p = e.path().string();
            if (p != ours && p != other && p.find("model.ckpt-") != std::string::npos &&
                p.find(".tmp") == std::string::npos)
                std::abort();
        }
    return 0;
}
