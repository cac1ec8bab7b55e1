// DataParallel: see data_parallel.hpp.
#include "train/data_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"
#include "core/log.hpp"

namespace bertbench::train {

DataParallel::DataParallel(dist::Comm& comm, size_t bucket_bytes)
    : comm_(&comm), bucket_bytes_(bucket_bytes) {}

DataParallel::DataParallel(dist::Comm& comm, const model::ParamTable& table, size_t bucket_bytes)
    : comm_(&comm), bucket_bytes_(bucket_bytes) {
    set_table(table);
}

void DataParallel::set_table(const model::ParamTable& table) {
    if (!active()) return;
    std::vector<size_t> bounds;
    for (const model::ParamInfo& p : table.entries()) bounds.push_back(p.offset);
    reducer_ = std::make_unique<dist::GradientReducer>(*comm_, table.total_floats(), bounds, bucket_bytes_);
    device_buckets_ = std::make_unique<dist::GradientBuckets>(table.total_floats(), bounds, bucket_bytes_);
}

void DataParallel::set_device(backend::Backend& be) {
    be_ = &be;
    collectives_.reset();
    device_reduction_.clear();
    if (!active() || be.host_memory()) return;
    const char* env = std::getenv("BB_DEVICE_COMM");
    const std::string mode = env && *env ? env : "auto";
    if (mode != "auto" && mode != "nccl" && mode != "host")
        fail("BB_DEVICE_COMM={}: expected auto, nccl or host (environment)", mode);
    std::string why = mode == "host" ? "BB_DEVICE_COMM=host" : "";
    std::vector<std::byte> id;
    if (mode != "host" && is_root()) id = be.collectives_id(why);
    uint64_t n = id.size();  // rank 0's id, its length first (0: none, rank 0 says why)
    comm_->broadcast(std::as_writable_bytes(std::span<uint64_t>(&n, 1)), 0);
    std::string error;
    if (n > 0) {
        id.resize(n);
        comm_->broadcast(id, 0);
        try {
            collectives_ = be.collectives(id, rank(), size());
        } catch (const Error& e) {
            error = e.what();
        }
        if (any(!error.empty())) {  // every rank falls back together
            collectives_.reset();
            why = error.empty() ? "another rank could not create the collectives" : error;
            n = 0;
        }
    }
    if (n == 0 && why.empty()) why = "rank 0 has no collectives for this backend";
    if (n == 0 && mode == "nccl")
        fail("BB_DEVICE_COMM=nccl: the {} backend's collectives are not available: {}", be.name(), why);
    device_reduction_ = collectives_ ? collectives_->describe() : "host memory (" + why + ")";
    if (is_root()) log::info("mpirun: {} ranks on {} devices; gradients averaged by {}", size(), be.name(),
                             device_reduction_);
}

int DataParallel::local_batch(int global_batch, const std::string& flag) const {
    return dist::local_batch(global_batch, size(), flag);
}

void DataParallel::require_same(const std::string& what, const std::string& value,
                                const std::string& hint) const {
    dist::require_same_on_all_ranks(*comm_, value, what, hint);
}

void DataParallel::require_all_ok(const std::string& local_error) const {
    if (!active()) {
        if (!local_error.empty()) fail("{}", local_error);
        return;
    }
    const std::vector<std::string> all = comm_->allgather(local_error);
    // every rank with the same error (a file they all read): said once, as a single process says it
    if (std::all_of(all.begin(), all.end(), [&](const std::string& e) { return !e.empty() && e == all[0]; }))
        fail("{}", all[0]);
    std::string msg;
    for (size_t r = 0; r < all.size(); ++r)
        if (!all[r].empty()) msg += fmt::format("{}rank {}: {}", msg.empty() ? "" : "; ", r, all[r]);
    if (!msg.empty()) fail("{}", msg);
}

bool DataParallel::any(bool flag) const {
    return active() ? comm_->sum(int64_t{flag ? 1 : 0}) > 0 : flag;
}

model::Losses DataParallel::global_losses(model::BertPretrainer& engine, const model::Losses& l) {
    return train::global_losses(*comm_, engine, l);
}

model::Losses global_losses(dist::Comm& comm, model::BertPretrainer& engine, const model::Losses& l) {
    if (comm.size() == 1) return l;
    // The forward's sums (Σw·CE, Σw, ΣCE, the counts) add up over ranks; the means follow as the
    // forward computes them.
    double v[7] = {l.mlm_loss_sum, l.mlm_weight, l.nsp_loss_sum, l.mlm_correct,
                   static_cast<double>(l.nsp_correct), static_cast<double>(l.nsp_count),
                   static_cast<double>(l.mlm_count)};
    comm.all_reduce_sum(std::span<double>(v, 7));
    model::Losses g;
    g.mlm_loss_sum = v[0];
    g.mlm_weight = v[1];
    g.mlm_loss = v[0] / (v[1] + 1e-5);
    g.nsp_loss_sum = v[2];
    g.nsp_count = static_cast<int>(v[5]);
    g.nsp_loss = v[5] > 0 ? v[2] / v[5] : 0.0;
    g.mlm_correct = v[3];
    g.nsp_correct = static_cast<int>(v[4]);
    g.mlm_count = static_cast<int>(v[6]);
    g.total = g.mlm_loss + g.nsp_loss;
    engine.set_global_mlm_weight(g.mlm_weight, comm.size());
    return g;
}

void DataParallel::begin_backward(model::BertPretrainer& engine, std::span<float> grads, bool overlap) {
    engine.set_backward_hook(begin_backward(grads, overlap));
}

model::GradientsReady DataParallel::begin_backward(std::span<float> grads, bool overlap) {
    overlapped_ = nullptr;
    if (!active() || !overlap || (!be_->host_memory() && !collectives_)) return {};
    if (!reducer_) fail("[dist] DataParallel: set_table() before the first backward");
    if (collectives_) {  // a bucket's sum starts on the devices as soon as its gradients are final
        device_buckets_->begin(grads.size());
        overlapped_ = grads.data();
        return [this, start = device_sum(grads.data())](std::span<const model::ParamRange> ready) {
            for (const model::ParamRange& r : ready) device_buckets_->ready(r.begin, r.end, start);
        };
    }
    reducer_->begin(grads);
    overlapped_ = grads.data();
    return [this](std::span<const model::ParamRange> ready) {
        for (const model::ParamRange& r : ready) reducer_->ready(r.begin, r.end);
    };
}

dist::GradientBuckets::Start DataParallel::device_sum(float* grads) {
    return [this, grads](size_t begin, size_t end) { collectives_->start_sum(grads + begin, end - begin); };
}

optim::GradientMean DataParallel::mean() {
    if (!active()) return {};
    return [this](std::span<float> buf) {
        if (collectives_) {  // on the devices: the sum, then × 1/N as the host reducer does
            if (buf.data() == overlapped_) {  // the rest of the buckets begin_backward's hook started
                stats_.started_early += device_buckets_->started();
                device_buckets_->start_rest(device_sum(buf.data()));
                collectives_->wait_started();
            } else {
                collectives_->all_reduce_sum(buf.data(), buf.size());
            }
            overlapped_ = nullptr;
            BB_OP(*be_, scale_values)(buf.data(), buf.size(), 1.0f / static_cast<float>(size()), nullptr);
            stats_.bytes += static_cast<double>(buf.size_bytes());
            ++stats_.reductions;
            return;
        }
        if (!reducer_) fail("[dist] DataParallel: set_table() before the first update");
        const bool staged = !be_->host_memory();
        std::span<float> host = buf;
        if (staged) {
            staging_.resize(buf.size());
            be_->download(staging_.data(), buf.data(), buf.size_bytes());
            host = staging_;
        }
        if (host.data() != overlapped_) reducer_->begin(host);
        overlapped_ = nullptr;
        const dist::ReduceStats s = reducer_->finish();
        if (staged) be_->upload(buf.data(), staging_.data(), buf.size_bytes());
        stats_.wait_s += s.wait_s;
        stats_.span_s += s.span_s;
        stats_.started_early += s.started_early;
        stats_.bytes += static_cast<double>(s.bytes);
        ++stats_.reductions;
    };
}

DataParallel::Stats DataParallel::take_stats() {
    const Stats s = stats_;
    stats_ = {};
    return s;
}

void DataParallel::require_same_weights(std::span<const float> params, const std::string& when,
                                        const std::string& hint) const {
    if (!active()) return;
    std::vector<float> copy;
    const std::span<const float> host = backend::host_view(*be_, params.data(), params.size(), copy);
    const uint64_t h = dist::fnv1a64(host.data(), host.size_bytes());
    require_same("the weights' FNV-1a hash " + when, fmt::format("{:016x}", h), hint);
}

nlohmann::json DataParallel::gather_reader_states(const nlohmann::json& mine) const {
    if (!active()) return mine;
    nlohmann::json all = nlohmann::json::array();
    for (const std::string& s : comm_->allgather(mine.dump())) all.push_back(nlohmann::json::parse(s));
    return all;
}

nlohmann::json DataParallel::reader_state_for_rank(const nlohmann::json& saved,
                                                    uint64_t* first_epoch) const {
    if (first_epoch != nullptr) *first_epoch = 0;
    if (saved.is_null()) return saved;
    const int n = size();
    if (saved.is_object() && n == 1) return saved;
    if (saved.is_array() && static_cast<int>(saved.size()) == n) return saved[static_cast<size_t>(rank())];
    if (first_epoch != nullptr) *first_epoch = epoch_after(saved);  // N changed
    return nullptr;
}

uint64_t DataParallel::epoch_after(const nlohmann::json& saved) {
    uint64_t last = 0;
    for (const nlohmann::json& s : saved.is_array() ? saved : nlohmann::json::array({saved}))
        if (s.is_object() && s.contains("epoch") && s["epoch"].is_number_unsigned())
            last = std::max(last, s["epoch"].get<uint64_t>());
    return last + 1;
}

}  // namespace bertbench::train
