// What a training loop does differently under `mpirun -np N` (issue 12, docs/distributed.md), in
// one object, so the loop's edits stay small. With one process every call is a cheap no-op and no
// figure changes. Order of a data-parallel micro-step:
//   forward (local b = global / N sequences) -> global_losses() (one small all-reduce: the global
//   loss for logs and non-finite checks, and the global masked-LM weight for the backward) ->
//   begin_backward() (when the updater is overlappable(): the engine's hook starts bucketed
//   all-reduces as layers finish) -> backward -> updater.micro_step(params, grads, mean()).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "dist/comm.hpp"
#include "dist/grad_reducer.hpp"
#include "model/bert.hpp"
#include "model/param_table.hpp"
#include "optim/update.hpp"

namespace bertbench::train {

// The global batch's losses from this rank's (collective; see DataParallel::global_losses).
model::Losses global_losses(dist::Comm& comm, model::BertPretrainer& engine, const model::Losses& local);

class DataParallel {
public:
    // bucket_bytes: the reducer's bucket (Horovod's fusion buffer, DDP's bucket_cap_mb).
    explicit DataParallel(dist::Comm& comm, size_t bucket_bytes = size_t{4} << 20);
    DataParallel(dist::Comm& comm, const model::ParamTable& table,
                 size_t bucket_bytes = size_t{4} << 20);
    // The model's parameter layout, once it is known (before the first backward).
    void set_table(const model::ParamTable& table);
    // The backend whose memory holds the gradients and weights (the CPU's unless set). Collective.
    // Where that memory is not the host's (a GPU's), mean() sums on the devices with the backend's
    // own collectives (NCCL) when every rank can create them, else (no NCCL; ranks sharing a GPU,
    // which NCCL refuses; BB_DEVICE_COMM=host) it stages through the host: copies the buffer to
    // host memory, averages it there over the ranks (MPI) and copies it back. The collectives
    // overlap the backward as the host reducer does (buckets started as layers finish,
    // Collectives::start_sum); host staging does not (begin_backward installs no hook).
    // BB_DEVICE_COMM=nccl makes a failure to create the collectives an Error. Rank 0 logs which
    // one runs.
    void set_device(backend::Backend& be);
    // What averages a device's gradients: "NCCL 2.28.3 (rank 0 of 2)", "host memory (why)", or ""
    // (host memory is the gradients' own, or one process).
    const std::string& device_reduction() const { return device_reduction_; }

    dist::Comm& comm() const { return *comm_; }
    int rank() const { return comm_->rank(); }
    int size() const { return comm_->size(); }
    bool active() const { return comm_->size() > 1; }
    bool is_root() const { return comm_->rank() == 0; }

    // --train_batch_size (and --eval_batch_size) are GLOBAL: this rank's share, an Error naming
    // the flag when N does not divide it.
    int local_batch(int global_batch, const std::string& flag) const;
    // Collective: an Error on every rank when `value` (a flags/config hash, a file list ...)
    // differs between ranks, naming the first differing rank and `what`.
    void require_same(const std::string& what, const std::string& value, const std::string& hint) const;
    // Collective: every rank passes "" or its own error message (e.g. it could not open its data);
    // then every rank throws the same Error naming each failed rank, or none does.
    void require_all_ok(const std::string& local_error) const;
    // Collective: true on every rank when `flag` is true on any rank.
    bool any(bool flag) const;

    // Collective, after the forward: the global batch's losses (masked-LM loss = Σw·CE / (Σw +
    // 1e-5) over all ranks' predictions, NSP = mean over all sequences, counts summed) and, for
    // the next backward, the global masked-LM weight (BertPretrainer::set_global_mlm_weight).
    model::Losses global_losses(model::BertPretrainer& engine, const model::Losses& local);

    // Before the backward of a micro-step: with overlap, the engine's hook starts the averaging
    // of `grads` as layers finish (overlap must be updater.overlappable() and grads the buffer
    // micro_step gets); without, the hook is removed and mean() does all the work.
    void begin_backward(model::BertPretrainer& engine, std::span<float> grads, bool overlap);
    // The same for any engine: returns the hook to install for this backward (empty: none).
    model::GradientsReady begin_backward(std::span<float> grads, bool overlap);
    // For ParameterUpdater::micro_step: averages a buffer over the ranks (finishing the overlapped
    // reduction when it is the buffer begin_backward() got). Empty with one process.
    optim::GradientMean mean();

    // Totals since the last take_stats(): exposed wait, reduction span (the host reducer's; a
    // device's sums run asynchronously and are not timed), bytes, calls, and the buckets started
    // before mean() (overlapped with the backward).
    struct Stats {
        double wait_s = 0, span_s = 0;
        double bytes = 0;
        int64_t reductions = 0;
        int64_t started_early = 0;
    };
    Stats take_stats();

    // Collective: Error unless every rank's weights have the same bits (FNV-1a of the buffer);
    // `when` ("after step 8") and `hint` complete the message.
    void require_same_weights(std::span<const float> params, const std::string& when,
                              const std::string& hint) const;

    // Checkpoints hold every rank's reader cursor. Collective: with N > 1 a JSON array of the
    // ranks' states (index = rank), with one process `mine` itself.
    nlohmann::json gather_reader_states(const nlohmann::json& mine) const;
    // This rank's cursor from a checkpoint's reader state: the saved state itself for one process
    // (and a single-process checkpoint resumed by one process), element `rank` of an array saved
    // by the same N. Otherwise (N changed) null: the caller starts a fresh epoch (`first_epoch`
    // gets the epoch after the last one any saved rank had reached) and says so.
    nlohmann::json reader_state_for_rank(const nlohmann::json& saved, uint64_t* first_epoch) const;
    // The epoch after the last one any rank of a checkpoint's reader state had reached.
    static uint64_t epoch_after(const nlohmann::json& saved);

private:
    // Starts the devices' sum of a bucket of `grads` (the collectives' overlapped form).
    dist::GradientBuckets::Start device_sum(float* grads);

    dist::Comm* comm_;
    size_t bucket_bytes_;
    std::unique_ptr<dist::GradientReducer> reducer_;
    std::unique_ptr<dist::GradientBuckets> device_buckets_;  // the collectives' buckets (set_table)
    float* overlapped_ = nullptr;  // the buffer whose reduction the backward started
    Stats stats_;
    backend::Backend* be_ = &backend::cpu();
    std::vector<float> staging_;  // host copy of a device buffer being averaged
    std::unique_ptr<backend::Collectives> collectives_;  // the devices' own sums (set_device)
    std::string device_reduction_;
};

}  // namespace bertbench::train
