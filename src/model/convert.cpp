// `bertbench convert`: read any checkpoint format into a list of named tensors (TF names, raw
// little-endian bytes), write it in another. HF names map through hf_to_tf_name/tf_to_hf_name
// (model/checkpoint.hpp); 2-D Linear weights are transposed element-size-generically, so the bytes
// are moved, never re-encoded.
#include "model/convert.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string_view>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "io/safetensors.hpp"
#include "io/tf_bundle.hpp"
#include "io/torch_checkpoint.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/convert_inputs.hpp"
#include "model/convert_outputs.hpp"
#include "model/param_table.hpp"

namespace bertbench::model {
namespace {

namespace fs = std::filesystem;

// A string as protobuf's text format writes it (CEscape: quotes, backslash and control bytes
// escaped, bytes >= 0x7f in octal).
std::string text_proto_escape(const std::string& s) {
    std::string out;
    for (const unsigned char c : s) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '"': out += "\\\""; break;
            case '\'': out += "\\'"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c < 0x20 || c >= 0x7f)
                    out += fmt::format("\\{:03o}", c);
                else
                    out += static_cast<char>(c);
        }
    }
    return out;
}

}  // namespace

std::string ConvertResult::summary() const {
    std::string s = fmt::format("converted {} -> {}: {} tensors written to {}", from, to, tensors,
                                fmt::join(written, ", "));
    if (!skipped.empty()) {
        std::string names;  // from the file: printable only
        for (size_t i = 0; i < std::min<size_t>(4, skipped.size()); ++i)
            names += (i ? ", " : "") + json_safe::printable(skipped[i]);
        s += fmt::format("; skipped {} ({}{})", skipped.size(), names, skipped.size() > 4 ? ", ..." : "");
    }
    return s;
}

ConvertResult convert_checkpoint(const ConvertOptions& options) {
    ConvertOptions o = options;
    if (o.input.empty()) fail("--input: expected a checkpoint, got none");
    if (o.output.empty()) fail("--output: expected a path, got none");
    // The names --init_checkpoint takes: run/model.ckpt-300 for our run/model.ckpt-300.safetensors
    o.input = resolve_checkpoint_name(o.input, "--input");
    std::string to = o.to;
    // the output's extension in any case (.PT as .pt; .pth is PyTorch's too)
    std::string ext = fs::path(o.output).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (to.empty())
        to = ext == ".safetensors" ? "safetensors" : ext == ".pt" || ext == ".pth" || ext == ".bin" ? "pt" : "tf";
    if (to != "tf" && to != "safetensors" && to != "hf" && to != "pt" && to != "nvidia_pt")
        fail("--to={}: expected tf, safetensors, hf, pt or nvidia_pt", to);
    // A file named for one format holding another: read by name elsewhere (from_pretrained,
    // torch.load, safetensors' loaders), it fails there, far from here
    const bool torch_ext = ext == ".pt" || ext == ".pth" || ext == ".bin";
    if (((to == "pt" || to == "nvidia_pt") && ext == ".safetensors") ||
        ((to == "safetensors" || to == "hf") && torch_ext))
        fail("--output={}: a {} file under a {} name (hint: --output=<name>{}, or leave out --to: the name picks the "
             "format)",
             o.output, to == "pt" || to == "nvidia_pt" ? "PyTorch" : "safetensors",
             torch_ext ? "PyTorch" : "safetensors", torch_ext ? ".safetensors" : ".pt");
    // One of a bundle's files named for the bundle (as --input takes PREFIX.index): its prefix
    for (const std::string_view file : {".index", ".data-00000-of-00001"})
        if (to == "tf" && o.output.size() > file.size() && o.output.ends_with(file)) {
            const std::string prefix = o.output.substr(0, o.output.size() - file.size());
            log::info("--output={}: writing the TensorFlow checkpoint of prefix {} ({}.index and "
                      "{}.data-00000-of-00001)", o.output, prefix, prefix, prefix);
            o.output = prefix;
            break;
        }
    if (o.tf_slots != "adam" && o.tf_slots != "lamb")
        fail("--tf_slots={}: expected adam or lamb", o.tf_slots);
    if (o.tf_slots == "lamb" && to != "tf")
        fail("--tf_slots=lamb: names the optimizer slots of a TensorFlow checkpoint; --to={} writes "
             "none", to);
    if (o.tf_gradient_accumulators && to != "tf")
        fail(
            "--tf_gradient_accumulators: adds variables of MLPerf's TensorFlow graph; --to={} has "
            "no place for them",
            to);

    const CheckpointFormat from = detect_checkpoint_format(o.input);
    Loaded in = read_checkpoint_tensors(o.input, from);

    // A model weight holds floats: an integer one would be dropped by some writers and kept as
    // integers by others, never a usable weight.
    for (const Tensor& t : in.tensors) {
        std::string hf;
        bool tr = false;
        const bool integer = t.dtype != io::DType::F64 && t.dtype != io::DType::F32 &&
                             t.dtype != io::DType::F16 && t.dtype != io::DType::BF16;
        if (integer && tf_to_hf_name(t.name, &hf, &tr))
            fail("{}: tensor \"{}\": expected a floating-point weight, found {}", o.input, t.name,
                 io::dtype_name(t.dtype));
    }

    if (o.tf_slots == "lamb") {  // the slots MLPerf's graph restores: the moments and the powers
        const auto has = [&](const std::string& name) {
            return std::any_of(in.tensors.begin(), in.tensors.end(),
                               [&](const Tensor& t) { return t.name == name; });
        };
        const bool moments = std::any_of(in.tensors.begin(), in.tensors.end(),
                                         [](const Tensor& t) { return t.name.ends_with("/adam_m"); });
        // a file whose slots already have MLPerf's names (converted from such a TF checkpoint)
        const bool lamb_named = std::any_of(in.tensors.begin(), in.tensors.end(),
                                            [](const Tensor& t) { return t.name.ends_with("/LAMB"); });
        if (!moments || !has("bertbench/beta_powers"))
            fail("{}: --tf_slots=lamb: expected a training checkpoint with the optimizer's state "
                 "(<tensor>/adam_m, /adam_v and bertbench/beta_powers), found {}", o.input,
                 lamb_named ? "its slots already under MLPerf's LAMB names (<tensor>/LAMB, /LAMB_1, "
                              "beta1_power, beta2_power), which --to=tf keeps as they are (hint: leave "
                              "out --tf_slots=lamb)"
                 : moments  ? "no bertbench/beta_powers"
                            : "no moments");
    }

    // Output files.
    std::vector<std::string> outs;
    std::string st_path, config_path;
    const bool hf_dir = to == "hf" && ext != ".safetensors";
    if (to == "tf") {
        check_tf_prefix(o.output);
        outs = {o.output + ".data-00000-of-00001", o.output + ".index"};
    } else if (!hf_dir) {
        st_path = o.output;
        outs = {st_path};
    } else {
        st_path = (fs::path(o.output) / "model.safetensors").string();
    }
    if (to == "hf") {
        config_path = (fs::path(st_path).parent_path() / "config.json").string();
        outs = {st_path, config_path};
    }
    // The output's directory and its missing parents are created (as TF's Saver creates a
    // prefix's); a failed conversion leaves no empty directory behind.
    std::optional<CreatedDirCleanup> created;
    if (const fs::path dir = hf_dir ? fs::path(o.output) : fs::path(o.output).parent_path(); !dir.empty()) {
        created.emplace(dir.string());
        std::error_code ec;
        fs::create_directories(dir, ec);
        if (ec) fail("--output={}: cannot create the directory {} ({})", o.output, dir.string(), ec.message());
    }
    std::vector<std::string> inputs = in.files;
    if (!o.bert_config_file.empty()) inputs.push_back(o.bert_config_file);
    // ... and a Hugging Face file's config.json beside it (its config, read below)
    for (const std::string& f : checkpoint_files(o.input)) inputs.push_back(f);
    const std::string tf_state =  // --to=tf's `checkpoint` state file, updated as TF's Saver does
        to != "tf" ? std::string()
        : fs::path(o.output).parent_path().empty()
            ? std::string("checkpoint")
            : (fs::path(o.output).parent_path() / "checkpoint").string();
    for (const std::string& out : outs) {
        for (const std::string& inp : inputs)
            if (same_file(out, inp))
                fail("--output={}: {} is the input file {} (hint: write to another path)",
                     o.output, out, inp);
    }
    // Every file is checked before the first is written: none replaces a directory (--overwrite
    // replaces files only), nor an existing file without --overwrite.
    std::vector<std::string> files = outs;
    if (!tf_state.empty()) files.push_back(tf_state);
    for (const std::string& out : files)
        if (std::error_code ec; fs::is_directory(out, ec))
            fail("--output={}: {}: expected a file or no such path, found a directory", o.output, out);
    check_outputs_free(o.output, outs, tf_state, o.overwrite);
    for (const std::string& out : files) {  // a killed conversion's temporaries of these files
        const fs::path p(out);
        remove_stale_temporaries(p.parent_path().string(), p.filename().string());
    }
    for (const std::string& inp : inputs)
        if (!tf_state.empty() && same_file(tf_state, inp))
            fail(
                "--output={}: its directory's TF state file {} is the input {} (hint: write to "
                "another directory)",
                o.output, tf_state, inp);

    BertConfig config;
    bool have_config = false;
    if (!o.bert_config_file.empty()) {
        config = BertConfig::from_json_file(o.bert_config_file);
        config.validate(o.bert_config_file);
        have_config = true;
    } else {  // ours' own, or HF's config.json beside its weights
        have_config = checkpoint_config(o.input, &config);
    }
    if (have_config) drop_vocab_padding(config, in.tensors, in.skipped);
    if (have_config)
        check_config_fits(config, o.bert_config_file.empty() ? o.input + " (its config)"
                                                             : "--bert_config_file=" + o.bert_config_file,
                          in.tensors);
    // and --bert_config_file, which replaces a bertbench input's own, must agree with it
    if (!o.bert_config_file.empty() && from == CheckpointFormat::bertbench && in.metadata.count("bert_config"))
        check_config_agrees(CheckpointReader(o.input).config(), config, o.input,
                            "--bert_config_file=" + o.bert_config_file);

    if (in.tensors.empty())  // nothing numeric to convert: no empty checkpoint is written
        fail("--input={}: expected tensors to convert, found none{}", o.input,
             in.skipped.empty() ? std::string()
                                : " (skipped: " + json_safe::printable(in.skipped[0]) +
                                      (in.skipped.size() > 1 ? ", ..." : "") + ")");
    // Every output holds fp32, as google's graphs restore their variables, our readers and torch's
    // BERT expect: an fp16, bf16 or fp64 tensor is widened exactly (fp64 rounded to nearest), as
    // the .pt reader does; integers are kept
    for (Tensor& t : in.tensors)
        if (std::vector<float> f32; t.dtype != io::DType::F32 && to_f32(t, &f32)) {
            t.dtype = io::DType::F32;
            t.bytes.resize(f32.size() * 4);
            std::memcpy(t.bytes.data(), f32.data(), t.bytes.size());
        }
    ConvertResult res;
    res.from = checkpoint_format_name(from);
    res.skipped = std::move(in.skipped);
    bool pretraining = false, squad = false;  // the heads the tensors hold
    for (const Tensor& t : in.tensors) {
        pretraining |= t.name.starts_with("cls/predictions/");
        squad |= t.name.starts_with("cls/squad/");
    }
    // t under its HF name, a kernel transposed to Linear's [out, in]; false (t listed as skipped)
    // for a tensor that is no model weight, or a SQuAD model's pooler
    const auto to_hf_layout = [&](Tensor& t, std::string* name) {
        bool tr = false;
        if (!tf_to_hf_name(t.name, name, &tr)) {
            res.skipped.push_back(t.name + " (not a model weight)");
            return false;
        }
        // HF's BertForQuestionAnswering has no pooler (add_pooling_layer=False): a strict
        // load_state_dict refuses one; NVIDIA's keeps it (its BertModel always has one)
        if (squad && to != "nvidia_pt" && t.name.starts_with("bert/pooler/")) {
            res.skipped.push_back(t.name + " (HF's BertForQuestionAnswering has no pooler)");
            return false;
        }
        if (tr) {
            if (t.shape.size() != 2)
                fail("{}: tensor \"{}\": expected a 2-D kernel, found {} dims", o.input, t.name, t.shape.size());
            t.bytes = transpose(t.bytes, t.shape[0], t.shape[1], io::dtype_size(t.dtype));
            std::swap(t.shape[0], t.shape[1]);
        }
        return true;
    };
    if (to == "tf") {
        res.to = checkpoint_format_name(CheckpointFormat::tf_bundle);
        io::TfBundleWriter w(o.output);
        const Tensor* our_step = nullptr;
        bool tf_step = false;
        const bool lamb = o.tf_slots == "lamb";
        const auto slot_name = [&](const std::string& name) {  // MLPerf LAMB's slot names
            for (const auto& [ours, theirs] : {std::pair{"/adam_m", "/LAMB"}, {"/adam_v", "/LAMB_1"}})
                if (lamb && name.ends_with(ours))
                    return name.substr(0, name.size() - std::strlen(ours)) + theirs;
            return name;
        };
        for (const Tensor& t : in.tensors) {
            w.add(slot_name(t.name), to_tf(t.dtype), t.shape, t.bytes.data(), t.bytes.size());
            if (t.name == "bertbench/global_step" && t.dtype == io::DType::I64 && t.bytes.size() == 8) our_step = &t;
            tf_step = tf_step || t.name == "global_step";
            if (lamb && t.name == "bertbench/beta_powers") {  // its non-slot scalars, float32
                if (t.dtype != io::DType::F32 || t.bytes.size() != 8)
                    fail("{}: tensor \"bertbench/beta_powers\": expected 2 float32 values", o.input);
                for (const int i : {0, 1})
                    w.add_copy(i == 0 ? "beta1_power" : "beta2_power", io::TfDType::float32, {},
                               t.bytes.data() + 4 * i, 4);
            }
        }
        res.tensors = in.tensors.size() + (lamb ? 2 : 0);
        // TF's own step counter, a scalar int64 (what an Estimator restores), from ours
        int64_t step = 0;
        if (our_step && !tf_step) {
            std::memcpy(&step, our_step->bytes.data(), 8);
            step = tf_global_step(step, in.metadata);  // NGC TF's counts updates
            w.add_copy("global_step", io::TfDType::int64, {}, &step, 8);
            ++res.tensors;
        }
        // checkpoint_add_gradacc.py: a zero accumulator beside every variable (ours excepted:
        // MLPerf's graph has none of them; one that is an accumulator already gets none)
        std::vector<char> zeros;
        if (o.tf_gradient_accumulators) {
            struct Var {
                std::string name;
                io::TfDType dtype;
                std::vector<int64_t> shape;
                size_t bytes;
            };
            std::vector<Var> vars;
            for (const Tensor& t : in.tensors)
                vars.push_back({slot_name(t.name), to_tf(t.dtype), t.shape, t.bytes.size()});
            if (lamb)
                vars.push_back({"beta1_power", io::TfDType::float32, {}, 4}),
                    vars.push_back({"beta2_power", io::TfDType::float32, {}, 4});
            if (our_step && !tf_step) vars.push_back({"global_step", io::TfDType::int64, {}, 8});
            size_t largest = 0;
            for (const Var& v : vars) largest = std::max(largest, v.bytes);
            zeros.assign(largest, 0);
            for (const Var& v : vars) {
                if (v.name.starts_with("bertbench/") || v.name.ends_with("/GradientAccumulator"))
                    continue;
                w.add(v.name + "/GradientAccumulator", v.dtype, v.shape, zeros.data(), v.bytes);
                ++res.tensors;
            }
        }
        std::vector<std::unique_ptr<AtomicFile>> staged = w.stage();
        // The `checkpoint` state file beside it, as TF's Saver writes it (a model directory's
        // latest checkpoint for tf.train.latest_checkpoint and an Estimator's restore): this one
        // the latest, the paths it listed before kept, as Saver.save keeps them
        const std::string name = text_proto_escape(fs::path(o.output).filename().string());
        std::string listed;
        if (struct stat st{}; ::stat(tf_state.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
            std::istringstream old_state(read_file(tf_state));
            for (std::string line; std::getline(old_state, line);)
                if (line.starts_with("all_model_checkpoint_paths: ") &&
                    line != "all_model_checkpoint_paths: \"" + name + "\"")
                    listed += line + "\n";
        }
        staged.push_back(staged_file(tf_state, "model_checkpoint_path: \"" + name + "\"\n" + listed +
                                                  "all_model_checkpoint_paths: \"" + name + "\"\n"));
        commit_together(staged);  // a stop leaves the three files or none of them
        outs.push_back(tf_state);
    } else if (to == "safetensors") {
        res.to = checkpoint_format_name(CheckpointFormat::bertbench);
        io::SafetensorsWriter w(st_path);
        for (const auto& [k, v] : in.metadata) w.set_metadata(k, v);
        // TF names, whatever the tensors: mark it ours, or a non-BERT file would read as HF.
        w.set_metadata("format", kCheckpointFormat);
        // --bert_config_file, when given, replaces the input's own (checked above to fit)
        if (have_config && (!o.bert_config_file.empty() || !in.metadata.count("bert_config")))
            w.set_metadata("bert_config", config.to_json().dump());
        for (const Tensor& t : in.tensors) w.add(t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
        w.write();
        res.tensors = in.tensors.size();
    } else if (to == "pt" || to == "nvidia_pt") {
        // pt: HF names (BertForPreTraining / BertForQuestionAnswering), Linear weights [out, in],
        // fp32, the MLM decoder's weight and bias sharing the word embeddings' and the output
        // bias's storages as HF's state_dict() has them (load_state_dict(strict=True) takes it).
        // nvidia_pt: NVIDIA DeepLearningExamples' modeling.py names (LinearActivation `dense_act`),
        // its vocabulary padded with zero rows to a multiple of 8 as its scripts pad the model's,
        // under {"model": ...} as its run_squad.py / run_pretraining.py read --init_checkpoint.
        const bool nvidia = to == "nvidia_pt";
        res.to = std::string(checkpoint_format_name(CheckpointFormat::pytorch)) + (nvidia ? " (NVIDIA's layout)" : "");
        std::vector<std::vector<float>> values;
        std::vector<io::TorchOutTensor> out;
        values.reserve(in.tensors.size());
        std::optional<size_t> word_embeddings, output_bias;  // in `out`
        for (Tensor& t : in.tensors) {
            std::string name;
            if (!to_hf_layout(t, &name)) continue;
            values.emplace_back();
            if (!to_f32(t, &values.back())) {
                values.pop_back();
                res.skipped.push_back(fmt::format("{} ({})", t.name, io::dtype_name(t.dtype)));
                continue;
            }
            const bool vocab_rows = t.name == "bert/embeddings/word_embeddings" || t.name == "cls/predictions/output_bias";
            if (nvidia && vocab_rows && !t.shape.empty() && t.shape[0] % 8 != 0) {
                const int64_t padded = (t.shape[0] + 7) / 8 * 8;
                values.back().resize(values.back().size() / static_cast<size_t>(t.shape[0]) * static_cast<size_t>(padded), 0.0f);
                t.shape[0] = padded;
            }
            if (nvidia)
                for (const char* linear : {"intermediate.dense.", "pooler.dense.", "transform.dense."})
                    if (const size_t at = name.find(linear); at != std::string::npos)
                        name.insert(at + std::strlen(linear) - 1, "_act");
            if (t.name == "bert/embeddings/word_embeddings") word_embeddings = out.size();
            if (t.name == "cls/predictions/output_bias") output_bias = out.size();
            out.push_back({name, t.shape, values.back()});
        }
        if (out.empty()) fail("--input={}: expected BERT weights, found none", o.input);
        // the tied decoder, as HF's and NVIDIA's state_dict() list it (NVIDIA's decoder has no bias)
        if (word_embeddings && output_bias) {
            const io::TorchOutTensor we = out[*word_embeddings], ob = out[*output_bias];
            out.push_back({"cls.predictions.decoder.weight", we.shape, we.values});
            if (!nvidia) out.push_back({"cls.predictions.decoder.bias", ob.shape, ob.values});
        }
        io::write_torch_checkpoint(st_path, out, nvidia ? "model" : "");
        res.tensors = out.size();
    } else {
        res.to = checkpoint_format_name(CheckpointFormat::hf_safetensors);
        if (!have_config)
            fail("--bert_config_file: expected the model's bert_config.json (for {}), got none "
                 "({} carries no config)", config_path, o.input);
        io::SafetensorsWriter w(st_path);
        w.set_metadata("format", "pt");  // what transformers' save_pretrained writes
        std::vector<Tensor> hf;
        for (Tensor& t : in.tensors) {
            std::string name;
            if (!to_hf_layout(t, &name)) continue;
            w.add(name, t.dtype, t.shape, t.bytes.data(), t.bytes.size());
            ++res.tensors;
        }
        if (res.tensors == 0)
            fail("--input={}: expected BERT weights (TF names), found none", o.input);
        std::vector<std::unique_ptr<AtomicFile>> staged;
        staged.push_back(w.stage());
        staged.push_back(staged_file(config_path, hf_config(config, pretraining, squad).dump(2) + "\n"));
        commit_together(staged);  // the weights without their config.json would load as no model
    }
    res.written = outs;
    return res;
}

}  // namespace bertbench::model
