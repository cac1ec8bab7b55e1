// ParamTable: the one description of a model's parameters — canonical TensorFlow name, shape,
// offset into one contiguous fp32 buffer, and whether weight decay / LAMB trust ratio apply.
// Allocation, initialisation, checkpoints, the optimizer, the allreduce and the tests all read it.
// Kernels are stored [in, out] as in TensorFlow; cls/seq_relationship/output_weights is [2, H].
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.hpp"

namespace bertbench::model {

// Which heads the model carries besides the encoder (and pooler).
enum class Heads {
    pretraining,  // cls/predictions/* (MLM, decoder tied to word embeddings) + cls/seq_relationship/*
    squad,        // cls/squad/output_weights [2, H], cls/squad/output_bias [2]
    none,         // encoder + pooler only
};

struct ParamInfo {
    std::string name;             // "bert/encoder/layer_0/attention/self/query/kernel"
    std::vector<int64_t> shape;   // TF shape, e.g. {768, 768}
    size_t offset = 0;            // in floats, into the flat buffer; 16-float (64-byte) aligned
    size_t size = 0;              // product of shape
    bool decay = true;            // false for names containing LayerNorm, layer_norm or bias
    // MLPerf TF2's AdamWeightDecay excludes ["layer_norm", "bias"] from its TF2 names, where every
    // LayerNorm is a *layer_norm but the masked-LM head's (transform/LayerNorm): decayed there
    bool decayed_in_tf2 = false;
    // Where the parameter sits (set with the name, never parsed from it): an encoder layer's index,
    // or -1 with `embedding` for bert/embeddings/*, or -1 alone for the pooler and the heads.
    int layer = -1;
    bool embedding = false;
    // false where no gradient reaches it: the pooler under the SQuAD head (which reads the sequence
    // output). The optimizer leaves it as loaded, as google's (no gradient: skipped) and NVIDIA's
    // run_squad.py (the pooler removed from the optimizer) do; it is not decayed.
    bool trained = true;
};

// Where the engine finds each tensor: offsets (floats) into the flat buffer, set where the table
// names the tensor (the engine never builds or parses a name). Kernels are [in, out].
struct EmbeddingParams {
    size_t word, position, type, gamma, beta;
};
struct LayerParams {
    size_t wq, bq, wk, bk, wv, bv;  // attention/self/{query,key,value}/{kernel,bias}
    size_t wo, bo, g1, b1;          // attention/output/dense/*, attention/output/LayerNorm/*
    size_t wi, bi;                  // intermediate/dense/*
    size_t wout, bout, g2, b2;      // output/dense/*, output/LayerNorm/*
};
struct PretrainingHeadParams {
    size_t pooler_w, pooler_b;                                 // bert/pooler/dense/*
    size_t transform_w, transform_b, transform_g, transform_beta;  // cls/predictions/transform/*
    size_t output_bias;                                        // cls/predictions/output_bias
    size_t nsp_w, nsp_b;                                       // cls/seq_relationship/*
};
struct SquadHeadParams {
    size_t w, b;  // cls/squad/output_weights [2, H], cls/squad/output_bias [2]
};

// A range of the flat buffer [begin, end) in floats: one tensor.
struct ParamRange {
    size_t begin, end;
};
// Called by the engine's backward as gradients become final (the data-parallel all-reduce starts
// them): the ranges of the tensors finished since the last call.
using GradientsReady = std::function<void(std::span<const ParamRange>)>;

class ParamTable {
public:
    ParamTable() = default;
    ParamTable(const BertConfig& config, Heads heads);

    const std::vector<ParamInfo>& entries() const { return entries_; }
    const ParamInfo& at(const std::string& name) const;  // Error if unknown
    const ParamInfo* find(const std::string& name) const;  // nullptr if unknown
    size_t total_floats() const { return total_; }         // buffer size incl. alignment padding
    size_t num_parameters() const;                          // sum of sizes (no padding)
    const EmbeddingParams& embeddings() const { return embeddings_; }
    const std::vector<LayerParams>& layers() const { return layers_; }
    const PretrainingHeadParams& pretraining_head() const;  // Error unless Heads::pretraining
    const SquadHeadParams& squad_head() const;              // Error unless Heads::squad
    const BertConfig& config() const { return config_; }
    Heads heads() const { return heads_; }

    std::span<float> view(std::span<float> buffer, const std::string& name) const;
    std::span<const float> view(std::span<const float> buffer, const std::string& name) const;

    // The reference initialisation, deterministic by seed: truncated normal (stddev
    // initializer_range, redrawn outside 2 sigma) for embeddings, kernels and output_weights;
    // LayerNorm gamma = 1, beta = 0; biases 0.
    void initialize(std::span<float> buffer, uint64_t seed) const;

    // True for the names LAMB/AdamW exclude from weight decay (LayerNorm, layer_norm, bias).
    static bool excluded_from_decay(const std::string& name);

private:
    BertConfig config_;
    Heads heads_ = Heads::pretraining;
    std::vector<ParamInfo> entries_;
    std::unordered_map<std::string, size_t> index_;  // name -> position in entries_
    size_t total_ = 0;
    EmbeddingParams embeddings_{};
    std::vector<LayerParams> layers_;
    PretrainingHeadParams pretraining_{};
    SquadHeadParams squad_{};
};

}  // namespace bertbench::model
