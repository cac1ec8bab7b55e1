// The benchmark runner (see runner.hpp): synthetic or real batches, timed steps, the per-op
// profile with its analytic FLOP/byte model (docs/benchmark.md "Profile").
#include "bench/runner.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/sysinfo.hpp"
#include "core/timing.hpp"
#include "data/pretrain_reader.hpp"
#include "io/example.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "optim/update.hpp"
#include "train/micro_step.hpp"

namespace bertbench::bench {
namespace {

bool is_squad(const Point& p) { return p.task == "squad"; }

// Everything one point needs: parameters, engine (the pretraining model or the span model),
// optimizer and its batches.
struct Setup {
    const Point& p;
    bool train;
    int max_pred;
    model::ParamTable table;
    backend::Backend& be;  // Point::backend, or the CPU's
    backend::Buffer<float> params, grads;  // be's memory
    std::unique_ptr<model::BertPretrainer> pretrainer;  // task pretraining
    std::unique_ptr<model::BertSquad> squad;            // task squad
    std::vector<model::Batch> batches;                  // task pretraining
    std::vector<SquadBatch> squad_batches;              // task squad
    std::string span_labels;
    std::unique_ptr<optim::ParameterUpdater> updater;
    uint64_t micro = 0;
    size_t next_batch = 0;

    explicit Setup(const Point& point)
        : p(point),
          train(point.mode == "train"),
          max_pred(point_max_predictions(point)),
          table(point.config, is_squad(point) ? model::Heads::squad : model::Heads::pretraining),
          be(point.backend ? *point.backend : backend::cpu()),
          params(be, table.total_floats()),
          grads(be, train ? table.total_floats() : 0) {
        params.zero();  // the padding between tensors too
        backend::modify_on_host(be, params.get(), params.size(),
                                [&](std::span<float> w) { table.initialize(w, 42); });
        const int needed = (p.warmup + p.steps) * (train ? p.steps_per_update : 1);
        if (is_squad(p)) {
            if (p.data_files.empty()) {
                squad_batches.push_back(synthetic_squad_batch(p.config, p.batch_size, p.seq_len, 7));
                span_labels = "synthetic";
            } else {
                bool has_positions = false;
                squad_batches = read_squad_batches(
                    p.data_files, p.seq_len, p.config.vocab_size, p.batch_size,
                    std::min(needed, 256), p.squad_layout == "padded", p.skip_corrupt_records,
                    &has_positions);
                span_labels = has_positions ? "features" : "cls";
            }
        } else if (p.data_files.empty()) {
            batches.push_back(synthetic_batch(p.config, p.batch_size, p.seq_len, max_pred, 7));
        } else {
            batches = read_batches(p.data_files, p.config, p.seq_len, max_pred, p.batch_size,
                                   std::min(needed, 256), p.skip_corrupt_records);
        }
        // after the data: files too small for the batch are said before its memory is planned
        const model::Plan plan{p.batch_size, p.seq_len, max_pred, /*forward_only=*/!train};
        model::EngineOptions opts{p.dtype};
        opts.backend = p.backend;
        opts.last_layer_subset = p.last_layer_subset;
        if (is_squad(p))
            squad = std::make_unique<model::BertSquad>(table, plan, opts);
        else
            pretrainer = std::make_unique<model::BertPretrainer>(table, plan, opts);
        if (train) {
            grads.zero();
            optim::LrSchedule schedule;
            schedule.num_train_steps = 1'000'000;
            // pretraining: MLPerf's LAMB; squad: run_squad.py's optimization.py AdamWeightDecay
            // (both with the global-norm clip 1.0 of their references)
            const optim::OptimizerConfig oc = is_squad(p) ? optim::OptimizerConfig::adamw_reference()
                                                          : optim::OptimizerConfig{};
            if (is_squad(p)) schedule.learning_rate = 5e-5;  // run_squad.py's default
            updater = std::make_unique<optim::ParameterUpdater>(
                table, oc, schedule, p.steps_per_update, optim::ClipMode::per_micro_batch, 1.0f, be);
        }
    }

    size_t arena_bytes() const { return squad ? squad->arena_bytes() : pretrainer->arena_bytes(); }

    // One step; returns the batches it used (for token and FLOP counts). Training: micro-steps
    // as the training loop runs them (train/micro_step.hpp); inference: one forward.
    void step(std::vector<const model::Batch*>& used) {
        used.clear();
        const int micro_batches = train ? p.steps_per_update : 1;
        for (int k = 0; k < micro_batches; ++k) {
            const size_t i = next_batch++;
            const SquadBatch* sb = squad ? &squad_batches[i % squad_batches.size()] : nullptr;
            const model::Batch& b = sb ? sb->batch : batches[i % batches.size()];
            used.push_back(&b);
            if (!train) {
                if (squad)
                    squad->forward(params.span(), b, {}, {}, false, 0, 0);
                else
                    pretrainer->forward(params.span(), b, false, 0, 0);
                continue;
            }
            if (squad) {
                train::SquadStep m(*squad, nullptr);  // one process (see micro_step.hpp)
                m.set_batch(b, sb->start_positions, sb->end_positions);
                train::micro_step(m, params.span(), grads.span(), {*updater}, 1234, micro);
            } else {
                train::PretrainStep m(*pretrainer, nullptr);
                m.set_batch(b);
                train::micro_step(m, params.span(), grads.span(), {*updater}, 1234, micro);
            }
            ++micro;
        }
        be.synchronize();  // the step ends when the device is done
    }

    double flops(const model::Batch& b) const {
        return model::forward_flops(p.config, b, squad ? model::Heads::squad : model::Heads::pretraining,
                                    p.last_layer_subset) *
               (train ? 3.0 : 1.0);
    }
};

}  // namespace

nlohmann::json definitions() {
    return {
        {"train_step",
         "steps_per_update x (forward with dropout + backward + global-norm clip/accumulate) + one "
         "LAMB update; the optimizer update IS included in the step time"},
        {"infer_step",
         "one forward of the pretraining model (encoder, pooler, MLM head at the "
         "gathered positions, NSP head), dropout off; latency = one step"},
        {"excluded",
         "the first `warmup_steps` steps of each point, model/optimizer setup, and "
         "reading/decoding the --data records (done before timing)"},
        {"sequences_per_second", "mean sequences per step / median step time"},
        {"tokens_per_second", "mean REAL (unpadded) tokens per step / median step time"},
        {"padded_tokens_per_second",
         "batch_size x seq_len x micro-batches per step / median step "
         "time (the padded-equivalent rate; equals tokens_per_second "
         "for synthetic full-length batches)"},
        {"gflops",
         "matmul FLOPs on real tokens (2 per multiply-add; backward = 2x forward) / "
         "median step time"},
        {"mfu",
         "gflops / GEMM ceiling of the point's dtype (fp32: the engine's sgemm, oneDNN; bf16: "
         "the engine's bf16 matmul; int8: its int8 matmul on the forward shapes, int ops/s) on "
         "BERT-base linear-layer shapes, 4096 tokens, at the same thread count"},
        {"latency_ms_pXX", "nearest-rank percentile of the timed step times"},
        {"squad_train_step",
         "task squad: steps_per_update x (span-model forward with dropout + run_squad.py's loss, "
         "mean of the start and end cross-entropies + backward + global-norm clip/accumulate) + "
         "one AdamW update (optimization.py AdamWeightDecayOptimizer, included)"},
        {"squad_infer_step",
         "task squad: one forward of the encoder and the span head (start/end logits of every "
         "computed row), dropout off; latency = one step"},
        {"squad_gflops",
         "task squad: the encoder's matmul FLOPs over the rows computed (attention over each "
         "sequence's keys) plus the span head's 2*N*H*2 (no pooler, no pretraining heads); "
         "backward = 2x forward"},
        {"squad_data",
         "task squad --data: run_squad.py feature TFRecords; squad_layout padded = every "
         "feature's max_seq_length rows, padding rows as queries over the real keys (run_squad.py's "
         "computation), real = the input_mask==1 tokens only; span_labels: features (their "
         "start/end positions), cls (eval features: every target is [CLS], position 0) or "
         "synthetic"}};
}

int default_max_predictions(int seq_len) {
    if (seq_len <= 128) return std::max(1, 20 * seq_len / 128);
    return std::max(20, 76 * seq_len / 512);
}

int point_max_predictions(const Point& p) {
    return is_squad(p) ? 0 : p.max_predictions > 0 ? p.max_predictions : default_max_predictions(p.seq_len);
}

model::Batch synthetic_batch(const model::BertConfig& c, int batch_size, int seq_len,
                             int max_predictions, uint64_t seed) {
    std::mt19937_64 rng(seed);
    model::Batch b;
    b.batch_size = batch_size;
    b.seq_offsets.push_back(0);
    const int P = std::min(max_predictions, std::max(0, seq_len - 2));
    for (int s = 0; s < batch_size; ++s) {
        const int base = b.seq_offsets.back();
        for (int t = 0; t < seq_len; ++t) {
            b.input_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.segment_ids.push_back(t < seq_len / 2 || c.type_vocab_size < 2 ? 0 : 1);
        }
        b.seq_offsets.push_back(base + seq_len);
        std::vector<int32_t> pos(static_cast<size_t>(std::max(0, seq_len - 2)));
        for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i + 1);
        std::shuffle(pos.begin(), pos.end(), rng);
        pos.resize(static_cast<size_t>(P));
        std::sort(pos.begin(), pos.end());
        for (int32_t p : pos) {
            b.masked_index.push_back(base + p);
            b.masked_ids.push_back(static_cast<int32_t>(rng() % c.vocab_size));
            b.masked_weights.push_back(1.0f);
            b.masked_seq.push_back(s);
        }
        b.next_sentence_labels.push_back(static_cast<int32_t>(rng() % 2));
    }
    return b;
}

namespace {

// The pretraining readers' errors name pretrain's flags; bench's for the same lengths are
// --seq_len and --max_predictions.
std::string with_bench_flags(std::string message) {
    for (const auto& [theirs, ours] : {std::pair<std::string, std::string>{"--max_seq_length", "--seq_len"},
                                       {"--max_predictions_per_seq", "--max_predictions"}})
        for (size_t at = message.find(theirs); at != std::string::npos; at = message.find(theirs, at + ours.size()))
            message.replace(at, theirs.size(), ours);
    return message;
}

}  // namespace

std::vector<model::Batch> read_batches(const std::vector<std::string>& files, const model::BertConfig& c,
                                       int seq_len, int max_predictions, int batch_size, int count,
                                       bool skip_corrupt_records) try {
    std::vector<model::Batch> out;
    while (static_cast<int>(out.size()) < count) {
        data::PretrainReaderConfig rc;
        rc.files = files;
        rc.max_seq_length = seq_len;
        rc.max_predictions_per_seq = max_predictions;
        rc.batch_size = batch_size;
        rc.training = false;  // fixed order, each record once; then start over
        rc.skip_corrupt_records = skip_corrupt_records;
        rc.vocab_size = c.vocab_size;
        rc.type_vocab_size = c.type_vocab_size;
        data::PretrainReader reader(rc);
        const size_t before = out.size();
        model::Batch b;
        while (static_cast<int>(out.size()) < count && reader.next(b))
            if (b.batch_size == batch_size) out.push_back(b);
        if (out.size() == before)
            fail(
                "--data: the files hold fewer than --batch_size={} records (hint: a smaller "
                "--batch_size or more files)",
                batch_size);
    }
    return out;
} catch (const Error& e) {
    throw Error(with_bench_flags(e.what()));
}

// ---- task squad ----------------------------------------------------------------------------

SquadBatch synthetic_squad_batch(const model::BertConfig& c, int batch_size, int seq_len,
                                 uint64_t seed) {
    std::mt19937_64 rng(seed);
    SquadBatch sb;
    model::Batch& b = sb.batch;
    b.batch_size = batch_size;
    b.seq_offsets.push_back(0);
    // [CLS] query [SEP] document [SEP], as convert_examples_to_features lays a feature out
    const int query = std::min(64, std::max(0, seq_len / 4 - 2));
    const int doc_begin = query + 2, doc_len = std::max(1, seq_len - query - 3);
    const int32_t cls = std::min(101, c.vocab_size - 1), sep = std::min(102, c.vocab_size - 1);
    for (int s = 0; s < batch_size; ++s) {
        for (int t = 0; t < seq_len; ++t) {
            const bool special = t == 0 || t == query + 1 || t == seq_len - 1;
            b.input_ids.push_back(special ? (t == 0 ? cls : sep)
                                          : static_cast<int32_t>(rng() % c.vocab_size));
            b.segment_ids.push_back(t <= query + 1 || c.type_vocab_size < 2 ? 0 : 1);
        }
        b.seq_offsets.push_back(b.seq_offsets.back() + seq_len);
        const int start = doc_begin + static_cast<int>(rng() % static_cast<uint64_t>(doc_len));
        const int len = 1 + static_cast<int>(rng() % 30);
        sb.start_positions.push_back(std::min(start, seq_len - 1));
        sb.end_positions.push_back(std::min({start + len - 1, doc_begin + doc_len - 1, seq_len - 1}));
    }
    return sb;
}

namespace {

// One FixedLenFeature int64 list of the expected length, or an Error naming the record.
const std::vector<int64_t>& int_feature(const io::Example& e, const char* name, size_t len,
                                        const std::string& where) {
    const io::Feature* f = e.find(name);
    if (!f)
        fail("{}: feature {} missing (expected a run_squad.py feature record: unique_ids, "
             "input_ids, input_mask, segment_ids[, start_positions, end_positions])",
             where, name);
    if (f->kind != io::Feature::Kind::int64 || f->ints.size() != len)
        fail("{}: feature {}: expected {} int64 value(s), got {} {}{}", where, name, len,
             f->size(),
             f->kind == io::Feature::Kind::int64   ? "int64"
             : f->kind == io::Feature::Kind::bytes ? "bytes"
                                                   : "float",
             len > 1 ? " (hint: --seq_len must equal the features' max_seq_length)" : "");
    return f->ints;
}

}  // namespace

int real_tokens(const model::Batch& b) {
    if (b.key_lengths.empty()) return b.num_tokens();
    int n = 0;
    for (int32_t k : b.key_lengths) n += k;
    return n;
}

void for_each_squad_feature(const std::vector<std::string>& files, int seq_len, int vocab_size,
                            bool skip_corrupt_records,
                            const std::function<bool(const SquadFeatureRecord&)>& fn) {
    const size_t T = static_cast<size_t>(seq_len);
    std::string payload;
    std::vector<int32_t> ids32(T), mask32(T), seg32(T);
    for (const std::string& file : files) {
        io::TfRecordReader reader(file, skip_corrupt_records);
        while (reader.next(payload)) {
            const uint64_t index = reader.index() - 1;  // of the record just read (after skips)
            const std::string where = fmt::format("[squad features] {}: record {}", file, index);
            const io::Example e = io::decode_example(payload, where);
            SquadFeatureRecord r;
            r.where = where;
            r.unique_id = int_feature(e, "unique_ids", 1, where)[0];
            const auto& ids = int_feature(e, "input_ids", T, where);
            const auto& mask = int_feature(e, "input_mask", T, where);
            const auto& seg = int_feature(e, "segment_ids", T, where);
            size_t n = 0;
            while (n < T && mask[n] == 1) ++n;
            for (size_t t = n; t < T; ++t)
                if (mask[t] != 0)
                    fail("{}: input_mask[{}] = {}: expected ones then zeros (the real tokens "
                         "first, as run_squad.py pads)",
                         where, t, mask[t]);
            if (n == 0) fail("{}: input_mask: no real token", where);
            // every position is checked: padding rows are computed in the padded layout
            for (size_t t = 0; t < T; ++t) {
                if (ids[t] < 0 || ids[t] >= vocab_size)
                    fail("{}: input_ids[{}] = {}: outside the model's vocabulary [0, {}) "
                         "(hint: --model / --bert_config_file of the vocabulary the features "
                         "were made with)",
                         where, t, ids[t], vocab_size);
                if (seg[t] != 0 && seg[t] != 1)
                    fail("{}: segment_ids[{}] = {}: expected 0 or 1", where, t, seg[t]);
                ids32[t] = static_cast<int32_t>(ids[t]);
                mask32[t] = static_cast<int32_t>(mask[t]);
                seg32[t] = static_cast<int32_t>(seg[t]);
            }
            r.input_ids = ids32;
            r.input_mask = mask32;
            r.segment_ids = seg32;
            r.real = n;
            if (e.find("start_positions") || e.find("end_positions")) {
                const int64_t start = int_feature(e, "start_positions", 1, where)[0];
                const int64_t end = int_feature(e, "end_positions", 1, where)[0];
                if (start < 0 || end < start || end >= static_cast<int64_t>(n))
                    fail("{}: start_positions {} / end_positions {}: expected 0 <= start <= "
                         "end < {} (the feature's real tokens)",
                         where, start, end, n);
                r.positions = {static_cast<int32_t>(start), static_cast<int32_t>(end)};
            }
            if (!fn(r)) return;
        }
    }
}

std::vector<SquadBatch> read_squad_batches(const std::vector<std::string>& files, int seq_len,
                                           int vocab_size, int batch_size, int count, bool padded,
                                           bool skip_corrupt_records, bool* has_positions) {
    std::vector<SquadBatch> out;
    bool all_positions = true;
    SquadBatch cur;
    const auto start_batch = [&] {
        cur = SquadBatch{};
        cur.batch.seq_offsets.push_back(0);
    };
    start_batch();
    while (static_cast<int>(out.size()) < count) {
        const size_t before = out.size();
        for_each_squad_feature(files, seq_len, vocab_size, skip_corrupt_records, [&](const SquadFeatureRecord& r) {
            const long n = static_cast<long>(r.real);
            if (padded) {
                model::append_padded_sequence(cur.batch, r.input_ids, r.input_mask, r.segment_ids, r.where);
            } else {
                cur.batch.input_ids.insert(cur.batch.input_ids.end(), r.input_ids.begin(), r.input_ids.begin() + n);
                cur.batch.segment_ids.insert(cur.batch.segment_ids.end(), r.segment_ids.begin(),
                                             r.segment_ids.begin() + n);
                cur.batch.seq_offsets.push_back(cur.batch.seq_offsets.back() + static_cast<int32_t>(n));
                ++cur.batch.batch_size;
            }
            if (!r.positions) all_positions = false;
            cur.start_positions.push_back(r.positions ? r.positions->first : 0);
            cur.end_positions.push_back(r.positions ? r.positions->second : 0);
            if (cur.batch.batch_size == batch_size) {
                out.push_back(std::move(cur));
                start_batch();
            }
            return static_cast<int>(out.size()) < count;
        });
        start_batch();  // a partial last batch is dropped; the next pass starts over
        if (out.size() == before)
            fail(
                "--data: the SQuAD feature files hold fewer than --batch_size={} features (hint: "
                "a smaller --batch_size or more files)",
                batch_size);
    }
    if (has_positions) *has_positions = all_positions;
    return out;
}

void check_train_dtype(ops::Precision d) {
    if (d == ops::Precision::int8)
        fail("--dtype=int8: int8 is for inference (--mode=infer or --mode=gemm); --mode=train runs fp32 or bf16");
}

void check_point(const Point& p) {
    if (p.seq_len > p.config.max_position_embeddings)
        fail("--seq_len={}: longer than max_position_embeddings ({}) of model {}", p.seq_len,
             p.config.max_position_embeddings, p.model);
    if (p.threads > sysinfo::cpus_available())
        fail("--threads={}: only {} CPUs are available to this process", p.threads,
             sysinfo::cpus_available());
    if (p.mode != "train" && p.mode != "infer")
        fail("--mode: expected train or infer, got \"{}\"", p.mode);
    if (p.mode == "train") check_train_dtype(p.dtype);
    if (p.task != "pretraining" && p.task != "squad")
        fail("--task: expected pretraining or squad, got \"{}\"", p.task);
    if (p.task == "squad")
        for (const std::string& f : p.data_files)
            if (io::is_hdf5_path(f))
                fail("--data={}: --task=squad reads run_squad.py feature TFRecords (eval.tf_record, "
                     "train.tf_record), not HDF5 pretraining shards",
                     f);
    if (p.task == "squad" && p.squad_layout != "padded" && p.squad_layout != "real")
        fail("--squad_layout: expected padded or real, got \"{}\"", p.squad_layout);
    if (p.task == "pretraining" && p.max_predictions > p.seq_len)
        fail("--max_predictions={}: expected at most --seq_len={} (each is a position of the sequence)",
             p.max_predictions, p.seq_len);
    if (p.task == "squad" && p.seq_len < 3)
        fail("--seq_len={}: a SQuAD feature needs at least 3 tokens ([CLS] [SEP] [SEP])", p.seq_len);
}

void check_data(const Point& p, int batch_size) {
    if (p.data_files.empty()) return;
    if (is_squad(p))
        read_squad_batches(p.data_files, p.seq_len, p.config.vocab_size, batch_size, 1, p.squad_layout == "padded",
                           p.skip_corrupt_records);
    else
        read_batches(p.data_files, p.config, p.seq_len, point_max_predictions(p), batch_size, 1, p.skip_corrupt_records);
}

PointResult run_point(const Point& p, double ceiling_gflops) {
    check_point(p);
    omp_set_num_threads(p.threads);
    sysinfo::reset_peak_rss();  // each point reports its own peak (a bf16 ceiling's matrices freed)
    Setup s(p);

    PointResult r;
    r.point = p;
    r.arena_mb = static_cast<double>(s.arena_bytes()) / (1 << 20);
    r.span_labels = s.span_labels;
    std::vector<const model::Batch*> used;
    double seqs = 0, real = 0, padded = 0, flops = 0, timed_ms = 0;
    for (int k = 0; k < p.warmup || static_cast<int>(r.step_ms.size()) < p.steps ||
                    timed_ms < 1e3 * p.min_time_s;
         ++k) {
        const double t0 = now_ms();
        s.step(used);
        const double dt = now_ms() - t0;
        if (k < p.warmup) continue;
        r.step_ms.push_back(dt);
        timed_ms += dt;
        for (const model::Batch* b : used) {
            seqs += b->batch_size;
            real += real_tokens(*b);
            padded += static_cast<double>(p.batch_size) * p.seq_len;
            flops += s.flops(*b);
        }
    }
    std::vector<double> sorted = r.step_ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    r.step_ms_median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    r.step_ms_min = sorted.front();
    r.step_ms_max = sorted.back();
    r.latency_ms_p50 = percentile(sorted, 0.50);
    r.latency_ms_p90 = percentile(sorted, 0.90);
    r.latency_ms_p99 = percentile(sorted, 0.99);
    const double per_s = 1e3 / r.step_ms_median / static_cast<double>(n);
    r.sequences_per_second = seqs * per_s;
    r.tokens_per_second = real * per_s;
    r.padded_tokens_per_second = padded * per_s;
    r.real_token_fraction = padded > 0 ? real / padded : 1.0;
    r.gflops = flops * per_s / 1e9;
    r.ceiling_gflops = ceiling_gflops;
    r.mfu = ceiling_gflops > 0 ? r.gflops / ceiling_gflops : 0.0;
    r.peak_rss_mb = sysinfo::peak_rss_mb();
    return r;
}

namespace {
// "synthetic", or the formats of the --data files: "tfrecord", "hdf5" or "tfrecord+hdf5".
std::string data_kind(const std::vector<std::string>& files) {
    if (files.empty()) return "synthetic";
    bool h5 = false, tf = false;
    for (const std::string& f : files) (io::is_hdf5_path(f) ? h5 : tf) = true;
    return h5 && tf ? "tfrecord+hdf5" : h5 ? "hdf5" : "tfrecord";
}
}  // namespace

nlohmann::json PointResult::to_json() const {
    nlohmann::json j = {{"mode", point.mode},
            {"model", point.model},
            {"seq_len", point.seq_len},
            {"batch_size", point.batch_size},
            {"threads", point.threads},
            {"steps_per_update", point.steps_per_update},
            {"dtype", ops::precision_name(point.dtype)},
            {"warmup_steps", point.warmup},
            {"timed_steps", step_ms.size()},
            {"min_time_s", point.min_time_s},
            {"data", data_kind(point.data_files)},
            {"data_files", point.data_files},
            {"sequences_per_second", sequences_per_second},
            {"tokens_per_second", tokens_per_second},
            {"padded_tokens_per_second", padded_tokens_per_second},
            {"real_token_fraction", real_token_fraction},
            {"step_ms_median", step_ms_median},
            {"step_ms_min", step_ms_min},
            {"step_ms_max", step_ms_max},
            {"latency_ms_p50", latency_ms_p50},
            {"latency_ms_p90", latency_ms_p90},
            {"latency_ms_p99", latency_ms_p99},
            {"step_ms", step_ms},
            {"gflops", gflops},
            // null without a ceiling (--noceiling): no MFU was measured, not an MFU of 0
            {"ceiling_gflops", ceiling_gflops > 0 ? nlohmann::json(ceiling_gflops) : nlohmann::json(nullptr)},
            {"mfu", ceiling_gflops > 0 ? nlohmann::json(mfu) : nlohmann::json(nullptr)},
            {"optimizer_included", point.mode == "train"},
            {"arena_mb", arena_mb},
            {"peak_rss_mb", peak_rss_mb},
            {"task", point.task}};
    if (point.task == "squad") {
        j["optimizer"] = point.mode == "train" ? "adamw" : "none";
        j["span_labels"] = span_labels;
        j["squad_layout"] = point.data_files.empty() ? "full" : point.squad_layout;
    } else {
        j["last_layer_subset"] = point.last_layer_subset;
    }
    return j;
}

// ---- profile: per-op time; the ops' costs from the engine's op list (model/cost.hpp) ----------

ProfileResult profile_point(const Point& p, int steps) {
    check_point(p);
    omp_set_num_threads(p.threads);
    Setup s(p);
    std::vector<const model::Batch*> used;
    s.step(used);  // warm-up, not profiled
    // A device's ops run behind the host: its own clock times them (CUDA events on its stream)
    const std::unique_ptr<profile::Timeline> timeline = s.be.timeline();
    struct Detach {
        ~Detach() { profile::use_timeline(nullptr); }
    } detach;
    profile::use_timeline(timeline.get());
    profile::enable(true);
    struct Acc {
        double seconds = 0;
        model::Cost cost;
    };
    std::vector<std::pair<std::string, Acc>> acc;
    double total = 0;
    for (int k = 0; k < steps; ++k) {
        profile::reset();
        profile::push("other");
        s.step(used);
        profile::pop();
        for (const profile::Entry& e : profile::entries()) {
            auto it = std::find_if(acc.begin(), acc.end(),
                                   [&](const auto& x) { return x.first == e.label; });
            if (it == acc.end()) it = acc.insert(acc.end(), {e.label, Acc{}});
            it->second.seconds += e.seconds;
            total += e.seconds;
            if (e.tag < 0) continue;  // bench's own "other": no cost
            const auto [op, pass] = model::op_from_tag(e.tag);
            for (size_t i = 0; i < used.size(); ++i) {
                // forward/backward ops count once per micro-batch; the optimizer once per step
                // (by position: synthetic micro-batches are one Batch object used again)
                if (op == model::Op::optimizer && i > 0) continue;
                const model::Batch* b = used[i];
                const model::Cost c =
                    model::op_cost(op, pass, p.config, *b, static_cast<double>(s.params.size()), p.last_layer_subset,
                                   p.dtype);
                it->second.cost.flops += c.flops;
                it->second.cost.bytes += c.bytes;
            }
        }
    }
    profile::enable(false);
    ProfileResult r;
    r.point = p;
    r.step_ms = total * 1e3 / steps;
    for (const auto& [label, a] : acc) {
        ProfileRow row;
        row.op = label;
        row.ms_per_step = a.seconds * 1e3 / steps;
        row.share = total > 0 ? a.seconds / total : 0;
        row.gflops = a.seconds > 0 ? a.cost.flops / a.seconds / 1e9 : 0;
        row.gbytes_per_s = a.seconds > 0 ? a.cost.bytes / a.seconds / 1e9 : 0;
        r.rows.push_back(row);
    }
    std::stable_sort(r.rows.begin(), r.rows.end(), [](const ProfileRow& x, const ProfileRow& y) {
        return x.ms_per_step > y.ms_per_step;
    });
    return r;
}

}  // namespace bertbench::bench
