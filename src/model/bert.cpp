// The BERT pretraining model (see bert.hpp): the encoder (encoder.hpp), then the pooler (tanh on the
// first token) -> NSP, and the gathered masked positions -> transform (dense, act, LN) -> tied
// decoder (word embeddingsᵀ + output_bias) -> MLM. Reference: google-research/bert modeling.py,
// run_pretraining.py (get_masked_lm_output, get_next_sentence_output). Legend: B sequences, N packed
// real tokens, P gathered masked positions, H hidden, V vocabulary, L layers.
#include "model/cost.hpp"
#include "model/encoder.hpp"

namespace bertbench::model {

using namespace detail;

template <typename T>
struct BasicBertPretrainer<T>::Impl : EngineMemory<T> {
    Plan plan;
    PretrainingHeadParams head;
    size_t word;  // the tied decoder
    int H = 0, V = 0, B = 0, P = 0;
    // (B,H) cls, pooled, dpooled, dcls; (B,2) nsp logits, dnsp; (P,H) gathered, t, tact, tl, dP*;
    // (P,V) logits, dlogits; rows: lse, loss, argmax, coef
    T *cls, *pooled, *dpooled, *dcls, *nsp, *dnsp, *nsp_lse, *nsp_coef;
    T *gath, *t, *tact, *tl, *tmean, *trstd, *dtl, *dtact, *dgath, *logits, *dlogits, *lse, *coef;
    T* db_part;  // bf16: the bias gradient's partial sums (cross_entropy_backward_bf16)
    std::vector<double> row_loss, nsp_loss;   // the losses' rows, read on the host
    std::vector<int32_t> argmax, nsp_argmax;
    std::vector<T> coef_h, nsp_coef_h;        // the backward's coefficients, made on the host
    // in the backend's memory: the batch's masked positions and labels, the losses' rows
    Memory<int32_t> masked_index, masked_ids, nsp_labels, d_argmax, d_nsp_argmax;
    // EngineOptions::last_layer_subset: the rows the last layer runs on ([CLS] rows, then the
    // masked positions), and 0, 1, ..., where the heads then find them in its output
    bool subset = false;
    std::vector<int32_t> last_rows;
    Memory<int32_t> iota;
    const int32_t *cls_rows = nullptr, *mlm_rows = nullptr;  // the last forward's, for the heads
    Memory<double> d_row_loss, d_nsp_loss;
    // bf16 decoder operands: tl (P,H) kept from the forward; dlogits (P,V) and dlogitsᵀ (V,P)
    Memory<ops::bf16> hb;
    double global_mlm_weight = -1;  // set_global_mlm_weight, for the next backward only
    int replicas = 1;

    void carve() {
        const size_t bmax = static_cast<size_t>(plan.max_batch);
        const size_t pmax = bmax * static_cast<size_t>(plan.max_predictions);
        const size_t grad = plan.forward_only ? 0 : 1;  // gradient buffers: none when forward-only
        Arena<T>& a = this->arena;
        const bool bf16_head = this->enc && this->enc->bf16();
        cls = a.take(bmax * H);
        pooled = a.take(bmax * H);
        dpooled = a.take(grad * bmax * H);
        dcls = a.take(grad * bmax * H);
        nsp = a.take(bmax * 2);
        dnsp = a.take(grad * bmax * 2);
        nsp_lse = a.take(bmax);
        nsp_coef = a.take(bmax);
        gath = a.take(pmax * H);
        t = a.take(pmax * H);
        tact = a.take(pmax * H);
        tl = a.take(pmax * H);
        tmean = a.take(pmax);
        trstd = a.take(pmax);
        dtl = a.take(grad * pmax * H);
        dtact = a.take(grad * pmax * H);
        dgath = a.take(grad * pmax * H);
        logits = a.take(pmax * V);
        // bf16: the backward writes bf16(dlogits) and its transpose (hb), never fp32 dlogits
        dlogits = a.take((bf16_head ? 0 : grad) * pmax * V);
        db_part = a.take((bf16_head ? grad : 0) * ops::cross_entropy_db_part_size(static_cast<int>(pmax), V));
        lse = a.take(pmax);
        coef = a.take(pmax);
        row_loss.assign(pmax, 0);
        argmax.assign(pmax, 0);
        coef_h.assign(pmax, T(0));
        nsp_coef_h.assign(bmax, T(0));
        if (subset && iota.empty()) {
            std::vector<int32_t> seq(bmax + pmax);
            for (size_t i = 0; i < seq.size(); ++i) seq[i] = static_cast<int32_t>(i);
            iota.assign(*this->be, seq.size());
            iota.upload(*this->be, seq.data(), seq.size());
        }
        if (masked_index.empty() && pmax > 0) {
            masked_index.assign(*this->be, pmax);
            masked_ids.assign(*this->be, pmax);
            d_argmax.assign(*this->be, pmax);
            d_row_loss.assign(*this->be, pmax);
        }
        if (nsp_labels.empty()) {
            nsp_labels.assign(*this->be, bmax);
            d_nsp_argmax.assign(*this->be, bmax);
            d_nsp_loss.assign(*this->be, bmax);
        }
        if (bf16_head && hb.empty()) hb.assign(*this->be, pmax * H + grad * 2 * pmax * V);
        nsp_loss.assign(bmax, 0);
        nsp_argmax.assign(bmax, 0);
    }
};

template <typename T>
BasicBertPretrainer<T>::BasicBertPretrainer(const ParamTable& table, Plan plan, EngineOptions opts)
    : impl_(std::make_unique<Impl>()) {
    Impl& m = *impl_;
    m.plan = plan;
    m.H = table.config().hidden_size;
    m.V = table.config().vocab_size;
    m.head = table.pretraining_head();
    m.word = table.embeddings().word;
    m.subset = opts.last_layer_subset;
    plan_memory(m, table, plan, opts);
    m.enc->pack_also(m.head.transform_w, m.H, m.H, false);      // the MLM transform
    m.enc->pack_also(m.word, m.H, m.V, true);     // the tied decoder: logits = tl · Eᵀ
}

template <typename T>
BasicBertPretrainer<T>::~BasicBertPretrainer() = default;

template <typename T>
size_t BasicBertPretrainer<T>::arena_bytes() const {
    return impl_->arena.size() * sizeof(T) + impl_->masks.size() + impl_->enc->copies_bytes() +
           impl_->hb.size() * sizeof(ops::bf16);
}

template <typename T>
void BasicBertPretrainer<T>::weights_changed() {
    impl_->enc->weights_changed();
}

template <typename T>
const Plan& BasicBertPretrainer<T>::plan() const {
    return impl_->plan;
}

template <typename T>
Losses BasicBertPretrainer<T>::forward(std::span<const T> params, const Batch& batch, bool training,
                                       uint64_t seed, uint64_t step) {
    Impl& m = *impl_;
    m.enc->check_batch(batch, params.size());
    const int B = batch.batch_size, P = batch.num_predictions(), H = m.H, V = m.V;
    if (P > m.plan.max_batch * m.plan.max_predictions)
        fail("engine: batch larger than planned: {} masked predictions > max_batch × "
             "max_predictions = {}",
             P, m.plan.max_batch * m.plan.max_predictions);
    if (batch.masked_ids.size() != static_cast<size_t>(P) ||
        batch.masked_weights.size() != static_cast<size_t>(P) ||
        batch.next_sentence_labels.size() != static_cast<size_t>(B))
        fail("engine: batch: {} masked_index, {} masked_ids, {} masked_weights, {} "
             "next_sentence_labels (expected P, P, P, B = {}, {}, {}, {})",
             P, batch.masked_ids.size(), batch.masked_weights.size(),
             batch.next_sentence_labels.size(), P, P, P, B);
    const int N = batch.num_tokens();
    for (int p = 0; p < P; ++p) {
        if (batch.masked_index[p] < 0 || batch.masked_index[p] >= N)
            fail("engine: batch: masked_index[{}] = {} outside the packed tokens [0, {})", p,
                 batch.masked_index[p], N);
        if (batch.masked_ids[p] < 0 || batch.masked_ids[p] >= V)
            fail("engine: batch: masked_ids[{}] = {} outside the vocabulary [0, {})", p,
                 batch.masked_ids[p], V);
    }
    for (int b = 0; b < B; ++b)
        if (batch.next_sentence_labels[b] < 0 || batch.next_sentence_labels[b] > 1)
            fail("engine: batch: next_sentence_labels[{}] = {}, expected 0 or 1", b,
                 batch.next_sentence_labels[b]);
    m.B = B;
    BB_PROFILE_OP_SCOPE(Op::other, Pass::forward);
    m.P = P;
    const T* w = params.data();
    m.last_rows.clear();
    if (last_layer_rows(batch, m.subset) < N) {  // the rows the heads read, where fewer than N
        for (int b = 0; b < B; ++b) m.last_rows.push_back(batch.seq_offsets[b]);
        m.last_rows.insert(m.last_rows.end(), batch.masked_index.begin(), batch.masked_index.end());
    }
    m.enc->forward(w, batch, training, seed, step, m.last_rows);
    const T* x = m.enc->output();
    const EngineOps<T>& k = m.enc->ops();
    m.masked_index.upload(*m.be, batch.masked_index.data(), static_cast<size_t>(P));
    const bool rows = !m.last_rows.empty();
    m.cls_rows = rows ? m.iota.data() : m.enc->offsets();
    m.mlm_rows = rows ? m.iota.data() + B : m.masked_index.data();
    m.masked_ids.upload(*m.be, batch.masked_ids.data(), static_cast<size_t>(P));
    m.nsp_labels.upload(*m.be, batch.next_sentence_labels.data(), static_cast<size_t>(B));
    BB_PROFILE_OP(Op::pooler_nsp, Pass::forward);
    // pooler + NSP: cls(B,H) = x[o_b]; pooled = tanh(cls·Wp + bp); nsp(B,2) = pooled·Wnᵀ + bn
    k.gather_rows(m.cls, x, m.cls_rows, B, H);
    k.linear_forward(m.pooled, m.cls, w + m.head.pooler_w, w + m.head.pooler_b, B, H, H);
    k.tanh_forward(m.pooled, static_cast<size_t>(B) * H);
    k.bias_rows(m.nsp, w + m.head.nsp_b, B, 2);
    k.gemm(MatmulType::f32, false, true, B, 2, H, m.pooled, H, w + m.head.nsp_w, H, 1.f, m.nsp, 2, nullptr, MatmulType::f32);
    k.cross_entropy_forward(m.d_nsp_loss.data(), m.d_nsp_argmax.data(), m.nsp_lse, m.nsp, m.nsp_labels.data(), B, 2);
    BB_PROFILE_OP(Op::mlm_transform, Pass::forward);
    // MLM: gath(P,H) = x[masked_index]; t = gath·Wt + bt; tl = LN(act(t)); logits = tl·Eᵀ + bias
    k.gather_rows(m.gath, x, m.mlm_rows, P, H);
    Encoder<T>& enc = *m.enc;
    if (!enc.head_linear_int8(m.t, m.gath, w, m.head.transform_w, m.head.transform_b, P, H, H))
        enc.linear_fwd(m.t, m.gath, enc.gemm_input(m.gath, static_cast<size_t>(P) * H), w, m.head.transform_w,
                       m.head.transform_b, P, H, H);
    k.activation_forward(m.enc->activation(), m.tact, m.t, static_cast<size_t>(P) * H, nullptr);
    k.layernorm_forward(m.tl, m.tmean, m.trstd, m.tact, w + m.head.transform_g, w + m.head.transform_beta, P, H, enc.config().layer_norm_eps, nullptr);
    BB_PROFILE_OP(Op::gemm_mlm_decoder, Pass::forward);
    // The logits (P,V) are the head's largest buffer (78 MB at BERT-mini batch 32): the bias goes
    // into the bf16 matmul's epilogue, or (fp32, whose sgemm has none) into the loss pass, rather
    // than a pass of its own that the GEMM then reads back with beta 1.
    bool bias_added = true;
    if (enc.head_linear_int8(m.logits, m.tl, w, m.word, m.head.output_bias, P, H, V)) {
        // int8 engines: the bias in the dequantizing epilogue
    } else if (enc.bf16()) {
        k.to_bf16(m.hb.data(), m.tl, static_cast<size_t>(P) * H);
        if (const void* pe = enc.packed(m.word))
            k.matmul_packed(MatmulType::bf16, P, V, H, m.hb.data(), H, pe, m.logits, V, w + m.head.output_bias,
                            MatmulType::f32);
        else
            k.gemm(MatmulType::bf16, false, true, P, V, H, m.hb.data(), H, enc.weights_bf16() + m.word, H, 0.f,
                   m.logits, V, w + m.head.output_bias, MatmulType::f32);
    } else if (const void* pe = enc.packed(m.word)) {
        k.matmul_packed(MatmulType::f32, P, V, H, m.tl, H, pe, m.logits, V, w + m.head.output_bias, MatmulType::f32);
    } else {
        k.gemm(MatmulType::f32, false, true, P, V, H, m.tl, H, w + m.word, H, 0.f, m.logits, V, nullptr,
               MatmulType::f32);
        bias_added = false;
    }
    BB_PROFILE_OP(Op::loss, Pass::forward);
    if (bias_added)
        k.cross_entropy_forward(m.d_row_loss.data(), m.d_argmax.data(), m.lse, m.logits, m.masked_ids.data(), P, V);
    else
        k.cross_entropy_forward_bias(m.d_row_loss.data(), m.d_argmax.data(), m.lse, m.logits, w + m.head.output_bias,
                                     m.masked_ids.data(), P, V);
    // the rows' losses and predictions to the host, for the sums below
    m.d_row_loss.download(*m.be, m.row_loss.data(), static_cast<size_t>(P));
    m.d_argmax.download(*m.be, m.argmax.data(), static_cast<size_t>(P));
    m.d_nsp_loss.download(*m.be, m.nsp_loss.data(), static_cast<size_t>(B));
    m.d_nsp_argmax.download(*m.be, m.nsp_argmax.data(), static_cast<size_t>(B));
    Losses out;
    double num = 0, den = 0;
    for (int p = 0; p < P; ++p) {
        const double wp = batch.masked_weights[p];
        num += wp * m.row_loss[p];
        den += wp;
        if (m.argmax[p] == batch.masked_ids[p]) out.mlm_correct += wp;
        if (wp != 0) ++out.mlm_count;
    }
    out.mlm_weight = den;
    out.mlm_loss_sum = num;
    out.mlm_loss = num / (den + 1e-5);
    double ns = 0;
    for (int b = 0; b < B; ++b) {
        ns += m.nsp_loss[b];
        if (m.nsp_argmax[b] == batch.next_sentence_labels[b]) ++out.nsp_correct;
    }
    out.nsp_count = B;
    out.nsp_loss_sum = ns;
    out.nsp_loss = B > 0 ? ns / B : 0.0;
    out.total = out.mlm_loss + out.nsp_loss;
    return out;
}

template <typename T>
void BasicBertPretrainer<T>::backward(std::span<T> grads, std::span<const T> params,
                                      const Batch& batch, T loss_scale) {
    Impl& m = *impl_;
    m.enc->require_backward();
    BB_CHECK(grads.size() >= params.size());
    BB_CHECK(batch.batch_size == m.B && batch.num_predictions() == m.P);
    const int B = m.B, P = m.P, H = m.H, V = m.V, N = m.enc->N();
    const T* w = params.data();
    T* g = grads.data();
    BB_PROFILE_OP_SCOPE(Op::loss, Pass::backward);
    // MLM: dlogits = w_p/(Σw + 1e-5) · (softmax − onehot) · loss_scale
    double den = 0;
    for (int p = 0; p < P; ++p) den += batch.masked_weights[p];
    // Data parallel (set_global_mlm_weight): the global batch's Σw, times the replica count
    // because the replicas' gradients are averaged afterwards.
    double replicas = 1;
    if (m.global_mlm_weight >= 0) den = m.global_mlm_weight, replicas = m.replicas;
    m.global_mlm_weight = -1;
    for (int p = 0; p < P; ++p)
        m.coef_h[p] = static_cast<T>(batch.masked_weights[p] * replicas / (den + 1e-5)) * loss_scale;
    m.be->upload(m.coef, m.coef_h.data(), static_cast<size_t>(P) * sizeof(T));
    Encoder<T>& enc = *m.enc;
    const EngineOps<T>& k = enc.ops();
    if (enc.bf16()) {
        // One pass over the logits writes bf16(dlogits) and the bias gradient (the fp32 dlogits
        // is never stored); the GEMM for dE reads its transpose.
        ops::bf16* dlb = m.hb.data() + static_cast<size_t>(m.plan.max_batch) * m.plan.max_predictions * H;
        ops::bf16* dlt = dlb + static_cast<size_t>(P) * V;
        k.cross_entropy_backward_bf16(dlb, g + m.head.output_bias, m.db_part, m.logits, m.lse, m.masked_ids.data(), m.coef,
                                      P, V);
        BB_PROFILE_OP(Op::gemm_mlm_decoder, Pass::backward);
        k.transpose_bf16(dlt, dlb, P, V, V);
        k.gemm(MatmulType::bf16, false, false, V, H, P, dlt, P, m.hb.data(), H, 1.f, g + m.word, H, nullptr,
               MatmulType::f32);  // dE += dlᵀ tl
        k.gemm(MatmulType::bf16, false, false, P, H, V, dlb, V, enc.weights_bf16() + m.word, H, 0.f, m.dtl, H,
               nullptr, MatmulType::f32);  // dtl = dl E
    } else {
        k.cross_entropy_backward(m.dlogits, m.logits, m.lse, m.masked_ids.data(), m.coef, P, V);
        BB_PROFILE_OP(Op::gemm_mlm_decoder, Pass::backward);
        k.bias_backward(g + m.head.output_bias, m.dlogits, P, V);
        k.gemm(MatmulType::f32, true, false, V, H, P, m.dlogits, V, m.tl, H, 1.f, g + m.word, H, nullptr,
               MatmulType::f32);  // dE += dlᵀ tl
        k.gemm(MatmulType::f32, false, false, P, H, V, m.dlogits, V, w + m.word, H, 0.f, m.dtl, H, nullptr,
               MatmulType::f32);  // dtl = dl E
    }
    BB_PROFILE_OP(Op::mlm_transform, Pass::backward);
    k.layernorm_backward(m.dtact, g + m.head.transform_g, g + m.head.transform_beta, m.dtl, m.tact, w + m.head.transform_g, m.tmean, m.trstd, P, H, false);
    k.activation_backward(m.enc->activation(), m.dtact, m.dtact, m.t, static_cast<size_t>(P) * H, nullptr, nullptr);
    enc.linear_bwd(m.dgath, g, w, m.head.transform_w, m.head.transform_b, m.dtact, m.gath, nullptr, P, H, H);
    BB_PROFILE_OP(Op::pooler_nsp, Pass::backward);
    // NSP: dnsp = (softmax − onehot)/B · loss_scale
    std::fill_n(m.nsp_coef_h.begin(), B, loss_scale / static_cast<T>(B));
    m.be->upload(m.nsp_coef, m.nsp_coef_h.data(), static_cast<size_t>(B) * sizeof(T));
    k.cross_entropy_backward(m.dnsp, m.nsp, m.nsp_lse, m.nsp_labels.data(), m.nsp_coef, B, 2);
    k.bias_backward(g + m.head.nsp_b, m.dnsp, B, 2);
    k.gemm(MatmulType::f32, true, false, 2, H, B, m.dnsp, 2, m.pooled, H, 1.f, g + m.head.nsp_w, H, nullptr,
           MatmulType::f32);  // dWn += dnspᵀ pooled
    k.gemm(MatmulType::f32, false, false, B, H, 2, m.dnsp, 2, w + m.head.nsp_w, H, 0.f, m.dpooled, H, nullptr,
           MatmulType::f32);  // dpooled = dnsp Wn
    k.tanh_backward(m.dpooled, m.dpooled, m.pooled, static_cast<size_t>(B) * H);
    k.linear_backward(m.dcls, g + m.head.pooler_w, g + m.head.pooler_b, m.dpooled, m.cls, w + m.head.pooler_w, B, H, H, false);
    BB_PROFILE_OP(Op::other, Pass::backward);
    // scatter into d(encoder output): the [CLS] rows' gradients, then the masked positions'
    T* dx = enc.doutput();
    m.be->zero(dx, static_cast<size_t>(N) * H * sizeof(T));
    k.scatter_add_rows(dx, m.dcls, m.cls_rows, B, H);
    k.scatter_add_rows(dx, m.dgath, m.mlm_rows, P, H);
    enc.gradients_ready(enc.heads_stage());
    enc.backward(g, w);
}

template <typename T>
void BasicBertPretrainer<T>::set_backward_hook(GradientsReady hook) {
    impl_->enc->backward_hook = std::move(hook);
}

template <typename T>
void BasicBertPretrainer<T>::set_global_mlm_weight(double weight_sum, int replicas) {
    if (!(weight_sum >= 0) || replicas < 1)
        fail("engine: global masked-LM weight {} over {} replicas: expected >= 0 and >= 1",
             weight_sum, replicas);
    impl_->global_mlm_weight = weight_sum;
    impl_->replicas = replicas;
}

template <typename T>
std::span<const T> BasicBertPretrainer<T>::mlm_logits() const {
    return impl_->host_view(impl_->logits, static_cast<size_t>(impl_->P) * impl_->V);
}
template <typename T>
std::span<const T> BasicBertPretrainer<T>::nsp_logits() const {
    return impl_->host_view(impl_->nsp, static_cast<size_t>(impl_->B) * 2);
}
template <typename T>
std::span<const T> BasicBertPretrainer<T>::sequence_output() const {
    return impl_->host_view(impl_->enc->output(), static_cast<size_t>(impl_->enc->output_rows()) * impl_->H);
}
template <typename T>
std::span<const T> BasicBertPretrainer<T>::pooled_output() const {
    return impl_->host_view(impl_->pooled, static_cast<size_t>(impl_->B) * impl_->H);
}
template <typename T>
std::span<const uint8_t> BasicBertPretrainer<T>::dropout_mask(DropoutSite site) const {
    const std::span<const uint8_t> m = impl_->enc->mask(site);
    return impl_->host_view(m.data(), m.size());
}
template <typename T>
bool BasicBertPretrainer<T>::fused_attention() const {
    return impl_->enc->fused_attention();
}

template class BasicBertPretrainer<float>;
template class BasicBertPretrainer<double>;

}  // namespace bertbench::model
