// The SQuAD span model (see bert.hpp): the encoder (encoder.hpp) and run_squad.py's span head.
// Reference: google-research/bert run_squad.py (create_model, compute_loss).
#include "model/cost.hpp"
#include "model/encoder.hpp"

namespace bertbench::model {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// SQuAD span head: logits(N,2) = x·Wᵀ + b; loss = (mean_b CE_start + mean_b CE_end)/2 where each CE
// is over all T_b rows of sequence b. With padded features (Batch::key_lengths) those rows are the
// max_seq_length positions and this is run_squad.py's loss; on real tokens only it is the softmax
// over the real tokens (HF's unpadded form). See bert.hpp.
template <typename T>
struct BasicBertSquad<T>::Impl : EngineMemory<T> {
    Plan plan;
    size_t ws = 0, bs = 0;
    int H = 0, B = 0, N = 0;
    bool has_labels = false;
    T *logits2 = nullptr, *start = nullptr, *end = nullptr, *dlogits2 = nullptr;
    Memory<int32_t> start_pos, end_pos;  // the batch's labels, in the backend's memory
    Memory<double> d_loss;               // (2B) each sequence's start, then end loss
    std::vector<double> loss;            // d_loss, read on the host

    void carve() {
        const size_t nmax = static_cast<size_t>(plan.max_batch) * plan.max_seq;
        Arena<T>& a = this->arena;
        logits2 = a.take(nmax * 2);
        start = a.take(nmax);
        end = a.take(nmax);
        dlogits2 = a.take(plan.forward_only ? 0 : nmax * 2);
        const size_t bmax = static_cast<size_t>(plan.max_batch);
        if (start_pos.empty()) {
            start_pos.assign(*this->be, bmax);
            end_pos.assign(*this->be, bmax);
            d_loss.assign(*this->be, 2 * bmax);
        }
        loss.assign(2 * bmax, 0.0);
    }
};

template <typename T>
BasicBertSquad<T>::BasicBertSquad(const ParamTable& table, Plan plan, EngineOptions opts)
    : impl_(std::make_unique<Impl>()) {
    if (opts.last_layer_subset)
        fail("engine: last_layer_subset is for the pretraining heads; the span head reads every row");
    Impl& m = *impl_;
    m.plan = plan;
    m.H = table.config().hidden_size;
    m.ws = table.squad_head().w;
    m.bs = table.squad_head().b;
    plan_memory(m, table, plan, opts);
}

template <typename T>
BasicBertSquad<T>::~BasicBertSquad() = default;

template <typename T>
size_t BasicBertSquad<T>::arena_bytes() const {
    return impl_->arena.size() * sizeof(T) + impl_->masks.size() + impl_->enc->copies_bytes();
}

template <typename T>
void BasicBertSquad<T>::weights_changed() {
    impl_->enc->weights_changed();
}

template <typename T>
SpanLosses BasicBertSquad<T>::forward(std::span<const T> params, const Batch& batch,
                                      std::span<const int32_t> start_positions,
                                      std::span<const int32_t> end_positions, bool training,
                                      uint64_t seed, uint64_t step) {
    Impl& m = *impl_;
    m.enc->check_batch(batch, params.size());
    const int B = batch.batch_size, H = m.H, N = batch.num_tokens();
    m.has_labels = !start_positions.empty();
    if (m.has_labels) {
        if (start_positions.size() != static_cast<size_t>(B) || end_positions.size() != static_cast<size_t>(B))
            fail("engine: squad: {} start and {} end positions, expected B = {}",
                 start_positions.size(), end_positions.size(), B);
        // a position outside its sequence adds no loss (ops/span_loss.hpp), as in run_squad.py
        m.start_pos.upload(*m.be, start_positions.data(), static_cast<size_t>(B));
        m.end_pos.upload(*m.be, end_positions.data(), static_cast<size_t>(B));
    }
    m.B = B;
    m.N = N;
    const T* w = params.data();
    m.enc->forward(w, batch, training, seed, step);
    BB_PROFILE_OP(Op::span_head, Pass::forward);
    const EngineOps<T>& k = m.enc->ops();
    k.bias_rows(m.logits2, w + m.bs, N, 2);
    k.gemm(MatmulType::f32, false, true, N, 2, H, m.enc->output(), H, w + m.ws, H, 1.f, m.logits2, 2, nullptr,
           MatmulType::f32);
    k.strided_copy(m.start, m.logits2, static_cast<size_t>(N), 2);
    k.strided_copy(m.end, m.logits2 + 1, static_cast<size_t>(N), 2);
    SpanLosses out;
    if (m.has_labels) {
        const int32_t* offsets = m.enc->offsets();
        k.segment_cross_entropy(m.d_loss.data(), nullptr, 0, m.start, 1, offsets, m.start_pos.data(), B, T(0));
        k.segment_cross_entropy(m.d_loss.data() + B, nullptr, 0, m.end, 1, offsets, m.end_pos.data(), B, T(0));
        m.d_loss.download(*m.be, m.loss.data(), 2 * static_cast<size_t>(B));
        double ls = 0, le = 0;
        for (int b = 0; b < B; ++b) {
            ls += m.loss[static_cast<size_t>(b)];
            le += m.loss[static_cast<size_t>(B + b)];
        }
        out.total = (ls / B + le / B) / 2;
    }
    return out;
}

template <typename T>
void BasicBertSquad<T>::backward(std::span<T> grads, std::span<const T> params, const Batch& batch,
                                 T loss_scale) {
    Impl& m = *impl_;
    m.enc->require_backward();
    if (!m.has_labels) fail("engine: squad backward needs start/end positions in the forward");
    BB_CHECK(batch.batch_size == m.B && batch.num_tokens() == m.N);  // the last forward's batch
    const int B = m.B, H = m.H, N = m.N;
    const T* w = params.data();
    T* g = grads.data();
    const T coef = loss_scale / static_cast<T>(2 * B);
    const EngineOps<T>& k = m.enc->ops();
    const int32_t* offsets = m.enc->offsets();
    k.segment_cross_entropy(m.d_loss.data(), m.dlogits2, 2, m.start, 1, offsets, m.start_pos.data(), B, coef);
    k.segment_cross_entropy(m.d_loss.data() + B, m.dlogits2 + 1, 2, m.end, 1, offsets, m.end_pos.data(), B, coef);
    k.bias_backward(g + m.bs, m.dlogits2, N, 2);
    k.gemm(MatmulType::f32, true, false, 2, H, N, m.dlogits2, 2, m.enc->output(), H, 1.f, g + m.ws, H, nullptr,
           MatmulType::f32);
    k.gemm(MatmulType::f32, false, false, N, H, 2, m.dlogits2, 2, w + m.ws, H, 0.f, m.enc->doutput(), H, nullptr,
           MatmulType::f32);
    m.enc->backward(g, w);
}

template <typename T>
std::span<const T> BasicBertSquad<T>::start_logits() const {
    return impl_->host_view(impl_->start, static_cast<size_t>(impl_->N));
}
template <typename T>
std::span<const T> BasicBertSquad<T>::end_logits() const {
    return impl_->host_view(impl_->end, static_cast<size_t>(impl_->N));
}
template <typename T>
std::span<const uint8_t> BasicBertSquad<T>::dropout_mask(DropoutSite site) const {
    const std::span<const uint8_t> m = impl_->enc->mask(site);
    return impl_->host_view(m.data(), m.size());
}

template class BasicBertSquad<float>;
template class BasicBertSquad<double>;

}  // namespace bertbench::model
