// NVIDIA HDF5 shards: our side of the reader, after libhdf5 has returned what it found (libhdf5
// itself is not the target). The input is a small header and the six arrays' bytes:
//   [0] T-1, [1] P-1, [2] N, [3] a schema defect (dataset k = [3] % 6, kind = [3] / 6 % 9),
//   [4] an array cut short (1..6) or none, then input_ids (i4 LE), input_mask (i1),
//   segment_ids (i1), masked_lm_positions (i4), masked_lm_ids (i4), next_sentence_labels (i1);
//   missing bytes read as 0.
// It runs check_hdf5_schema on the dataset descriptions, check_hdf5_arrays, decode_hdf5_record for
// every record and append_pretraining_record into one batch, checking the batch's invariants, and
// h5py_guess_chunk on shapes taken from the same bytes. Bad input must end in one-line Errors.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "data/pretrain_reader.hpp"
#include "fuzz_util.hpp"
#include "io/hdf5_shard.hpp"

using namespace bertbench;

namespace {

class Bytes {
  public:
    Bytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
    uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
    int32_t i32() {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) v |= uint32_t(u8()) << (8 * k);
        int32_t s;
        std::memcpy(&s, &v, 4);
        return s;
    }

  private:
    const uint8_t* d_;
    size_t n_, i_ = 0;
};

// The shared invariants, then NVIDIA's weight rule: weight 1.0 or the prediction is dropped, and
// position 0 ([CLS]) is never a prediction.
void check_batch(const model::Batch& b) {
    fuzz::check_batch_invariants(b);
    for (size_t p = 0; p < b.masked_index.size(); ++p) {
        if (b.masked_index[p] == b.seq_offsets[static_cast<size_t>(b.masked_seq[p])]) std::abort();
        if (b.masked_weights[p] != 1.0f) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Bytes in(data, size);
    const int T = 1 + in.u8(), P = 1 + in.u8();
    const uint64_t N = in.u8() % 9;
    const uint8_t defect = in.u8(), cut = in.u8() % 7;

    // What libhdf5 would report for a file holding these arrays, with at most one defect.
    std::array<io::Hdf5DatasetInfo, 6> info;
    for (size_t k = 0; k < 6; ++k) {
        const auto& s = io::kHdf5Datasets[k];
        auto& d = info[k];
        d.found = d.is_integer = true;
        d.type_size = static_cast<size_t>(s.bytes);
        d.type_name = s.bytes == 4 ? "int32" : "int8";
        d.dims = {N};
        if (s.width == io::Hdf5DatasetSpec::Width::seq) d.dims.push_back(uint64_t(T));
        if (s.width == io::Hdf5DatasetSpec::Width::pred) d.dims.push_back(uint64_t(P));
    }
    auto& bad = info[defect % 6];
    switch (defect / 6 % 9) {
        case 1: bad.found = false; break;
        case 2: bad.is_integer = false, bad.type_name = "float32"; break;
        case 3: bad.type_size = 3, bad.type_name = "int24"; break;
        case 4: bad.type_size = 8, bad.type_name = "int64"; break;
        case 5: bad.dims.push_back(1); break;
        case 6: bad.dims.back() += 1; break;
        case 7: bad.dims[0] += 1; break;
        case 8: bad.simple = false, bad.dims.clear(); break;
        default: break;
    }
    fuzz::expect_clean([&] { io::check_hdf5_schema("fuzz.hdf5", info, T, P); });

    io::Hdf5ShardArrays a;
    a.records = N;
    a.max_seq_length = T;
    a.max_predictions_per_seq = P;
    const size_t nt = N * size_t(T), np = N * size_t(P);
    for (size_t i = 0; i < nt; ++i) a.input_ids.push_back(in.i32());
    for (size_t i = 0; i < nt; ++i) a.input_mask.push_back(static_cast<int8_t>(in.u8()));
    for (size_t i = 0; i < nt; ++i) a.segment_ids.push_back(static_cast<int8_t>(in.u8()));
    for (size_t i = 0; i < np; ++i) a.masked_lm_positions.push_back(in.i32());
    for (size_t i = 0; i < np; ++i) a.masked_lm_ids.push_back(in.i32());
    for (size_t i = 0; i < N; ++i) a.next_sentence_labels.push_back(static_cast<int8_t>(in.u8()));
    if (N > 0) switch (cut) {
            case 1: a.input_ids.pop_back(); break;
            case 2: a.input_mask.pop_back(); break;
            case 3: a.segment_ids.pop_back(); break;
            case 4: a.masked_lm_positions.pop_back(); break;
            case 5: a.masked_lm_ids.pop_back(); break;
            case 6: a.next_sentence_labels.pop_back(); break;
            default: break;
        }
    fuzz::expect_clean([&] {
        io::check_hdf5_arrays("fuzz.hdf5", a);
        model::Batch batch;
        batch.seq_offsets.push_back(0);
        io::PretrainingRecord rec;
        for (uint64_t i = 0; i <= N; ++i) {  // i == N: one past the end must be an Error too
            fuzz::expect_clean([&] {
                const std::string where = "fuzz.hdf5: record " + std::to_string(i);
                io::decode_hdf5_record(a, i, where, rec);
                data::append_pretraining_record(batch, rec, where);
            });
            check_batch(batch);
        }
    });

    // h5py's chunk guess on a shape from the same bytes: terminates, every chunk dim in [1, dim].
    const std::vector<uint64_t> shape{1 + uint64_t(in.i32() & 0xFFFFFF), 1 + uint64_t(in.u8())};
    const size_t item = 1 + in.u8() % 8;
    const auto chunks = io::h5py_guess_chunk(shape, item);
    if (chunks.size() != shape.size()) std::abort();
    for (size_t k = 0; k < shape.size(); ++k)
        if (chunks[k] < 1 || chunks[k] > shape[k]) std::abort();
    return 0;
}
