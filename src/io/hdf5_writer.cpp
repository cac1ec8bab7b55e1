// NVIDIA HDF5 shards, the writing side (see hdf5_shard.hpp): h5py's chunk guess, write_hdf5_shard
// and Hdf5ShardWriter, through libhdf5 as hdf5_lib.hpp calls it.
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/hdf5_lib.hpp"
#include "io/hdf5_shard.hpp"

namespace bertbench::io {
using namespace h5;

std::vector<uint64_t> h5py_guess_chunk(const std::vector<uint64_t>& shape, size_t item_size) {
    // h5py's constants and loop, in double precision as numpy computes them; a zero-length dim
    // is guessed as 1024, as h5py guesses it (an empty shard's datasets are chunked too).
    constexpr double kBase = 16 * 1024, kMin = 8 * 1024, kMax = 1024 * 1024;
    std::vector<double> chunks;
    for (const uint64_t d : shape) chunks.push_back(d != 0 ? static_cast<double>(d) : 1024.0);
    BB_CHECK(!chunks.empty());
    auto product = [&] {
        double p = 1;
        for (double c : chunks) p *= c;
        return p;
    };
    const double dset_size = product() * static_cast<double>(item_size);
    double target = kBase * std::pow(2.0, std::log10(dset_size / (1024.0 * 1024.0)));
    if (target > kMax)
        target = kMax;
    else if (target < kMin)
        target = kMin;
    for (size_t i = 0;; ++i) {
        const double chunk_bytes = product() * static_cast<double>(item_size);
        if ((chunk_bytes < target || std::abs(chunk_bytes - target) / target < 0.5) &&
            chunk_bytes < kMax)
            break;
        if (product() == 1) break;
        const size_t idx = i % chunks.size();
        chunks[idx] = std::ceil(chunks[idx] / 2.0);
    }
    return {chunks.begin(), chunks.end()};
}

namespace {

// An HDF5 output's AtomicFile: a regular file (an HDF5 file is written with seeks, so a FIFO or a
// device is refused), written under its temporary name until commit().
std::unique_ptr<AtomicFile> open_hdf5_output(const std::string& path) {
    bool stream = false;
    output_target(path, &stream);
    if (stream)
        fail("{}: not a regular file (an HDF5 file is written with seeks), expected one", path);
    return std::make_unique<AtomicFile>(path);
}

// Writes `a` into `out`'s temporary (libhdf5 recreates it by name); out.commit() publishes it.
void write_hdf5_temporary(AtomicFile& out, const Hdf5ShardArrays& a) {
    const std::string& path = out.path();
    const std::string& tmp = out.temporary();
    {
        Hdf5Lock lock;
        Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
        if (!file.ok()) fail("{}: cannot create HDF5 file {} ({})", path, tmp, hdf5_error());
        // h5py's link creation list: intermediate groups, UTF-8 names.
        Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
        if (!lcpl.ok() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0 ||
            H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8) < 0)
            fail("{}: cannot set up HDF5 link properties ({})", path, hdf5_error());
        const uint64_t n = a.records;
        const uint64_t T = static_cast<uint64_t>(a.max_seq_length);
        const uint64_t P = static_cast<uint64_t>(a.max_predictions_per_seq);
        for (const Hdf5DatasetSpec& s : kHdf5Datasets) {
            std::vector<uint64_t> shape{n};
            if (s.width == Hdf5DatasetSpec::Width::seq) shape.push_back(T);
            if (s.width == Hdf5DatasetSpec::Width::pred) shape.push_back(P);
            const std::vector<hsize_t> dims(shape.begin(), shape.end());
            Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                         H5Sclose);
            Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
            if (!space.ok() || !dcpl.ok() || H5Pset_obj_track_times(dcpl.get(), 0) < 0)
                fail("{}: dataset {}: cannot set up ({})", path, s.name, hdf5_error());
            {
                const auto chunks = h5py_guess_chunk(shape, static_cast<size_t>(s.bytes));
                const std::vector<hsize_t> cd(chunks.begin(), chunks.end());
                if (H5Pset_chunk(dcpl.get(), static_cast<int>(cd.size()), cd.data()) < 0 ||
                    H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_ALLOC) < 0 ||
                    H5Pset_deflate(dcpl.get(), 4) < 0)
                    fail("{}: dataset {}: cannot set chunking/gzip ({})", path, s.name,
                         hdf5_error());
            }
            const hid_t file_type = s.bytes == 4 ? H5T_STD_I32LE : H5T_STD_I8LE;
            const hid_t mem_type = s.bytes == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8;
            Handle ds(H5Dcreate2(file.get(), s.name, file_type, space.get(), lcpl.get(), dcpl.get(),
                                 H5P_DEFAULT),
                      H5Dclose);
            if (!ds.ok()) fail("{}: dataset {}: cannot create ({})", path, s.name, hdf5_error());
            const void* data = nullptr;
            const std::string_view name = s.name;
            if (name == "input_ids") data = a.input_ids.data();
            if (name == "input_mask") data = a.input_mask.data();
            if (name == "segment_ids") data = a.segment_ids.data();
            if (name == "masked_lm_positions") data = a.masked_lm_positions.data();
            if (name == "masked_lm_ids") data = a.masked_lm_ids.data();
            if (name == "next_sentence_labels") data = a.next_sentence_labels.data();
            uint64_t values = 1;
            for (const uint64_t d : shape) values *= d;
            if (values > 0 && H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
                fail("{}: dataset {}: write failed ({}; is the disk full?)", path, s.name,
                     hdf5_error());
        }
        if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0)
            fail("{}: cannot flush ({}; is the disk full?)", path, hdf5_error());
        file.reset();
    }
}

}  // namespace

void write_hdf5_shard(const std::string& path, const Hdf5ShardArrays& a) {
    check_hdf5_arrays(path, a);
    const std::unique_ptr<AtomicFile> out = open_hdf5_output(path);
    write_hdf5_temporary(*out, a);
    out->commit();
}

Hdf5ShardWriter::Hdf5ShardWriter(std::string path, int max_seq_length, int max_predictions_per_seq)
    : path_(std::move(path)) {
    if (max_seq_length <= 0 || max_predictions_per_seq <= 0)
        fail("{}: max_seq_length/max_predictions_per_seq: expected > 0, got {}/{}", path_,
             max_seq_length, max_predictions_per_seq);
    a_.max_seq_length = max_seq_length;
    a_.max_predictions_per_seq = max_predictions_per_seq;
    file_ = open_hdf5_output(path_);  // an unwritable directory fails now, not after the work
}

Hdf5ShardWriter::~Hdf5ShardWriter() = default;  // AtomicFile's destructor removes the temporary
Hdf5ShardWriter::Hdf5ShardWriter(Hdf5ShardWriter&&) noexcept = default;

void Hdf5ShardWriter::write(const PretrainingRecord& r) {
    BB_CHECK(!finished_);
    const std::string where = fmt::format("{}: record {}", path_, a_.records);
    const size_t T = static_cast<size_t>(a_.max_seq_length);
    const size_t P = static_cast<size_t>(a_.max_predictions_per_seq);
    auto length = [&](const char* name, size_t got, size_t want) {
        if (got != want) fail("{}: feature {}: expected {} values, got {}", where, name, want, got);
    };
    length("input_ids", r.input_ids.size(), T);
    length("input_mask", r.input_mask.size(), T);
    length("segment_ids", r.segment_ids.size(), T);
    length("masked_lm_positions", r.masked_lm_positions.size(), P);
    length("masked_lm_ids", r.masked_lm_ids.size(), P);
    length("masked_lm_weights", r.masked_lm_weights.size(), P);
    auto fits = [&](const char* name, int64_t v, int64_t lo, int64_t hi, size_t at) {
        if (v < lo || v > hi)
            fail(
                "{}: feature {}: expected a value in [{}, {}] (the HDF5 schema's type), got {} at "
                "index {}",
                where, name, lo, hi, v, at);
    };
    for (size_t t = 0; t < T; ++t) {
        fits("input_ids", r.input_ids[t], INT32_MIN, INT32_MAX, t);
        fits("input_mask", r.input_mask[t], INT8_MIN, INT8_MAX, t);
        fits("segment_ids", r.segment_ids[t], INT8_MIN, INT8_MAX, t);
    }
    fits("next_sentence_labels", r.next_sentence_labels, INT8_MIN, INT8_MAX, 0);
    bool padding = false;
    for (size_t j = 0; j < P; ++j) {
        const float w = r.masked_lm_weights[j];
        const int64_t pos = r.masked_lm_positions[j], id = r.masked_lm_ids[j];
        fits("masked_lm_positions", pos, INT32_MIN, INT32_MAX, j);
        fits("masked_lm_ids", id, INT32_MIN, INT32_MAX, j);
        const bool ok = w == 1.0f ? !padding && pos > 0 : w == 0.0f && pos == 0 && id == 0;
        if (!ok)
            fail(
                "{}: feature masked_lm_weights: cannot be stored in NVIDIA's HDF5 schema, which "
                "derives weights from positions: expected 1.0 with a position > 0 for the first "
                "predictions, then 0.0 with position and id 0; got weight {} with position {} and "
                "id {} at index {}",
                where, w, pos, id, j);
        padding = padding || w == 0.0f;
    }
    for (size_t t = 0; t < T; ++t) {
        a_.input_ids.push_back(static_cast<int32_t>(r.input_ids[t]));
        a_.input_mask.push_back(static_cast<int8_t>(r.input_mask[t]));
        a_.segment_ids.push_back(static_cast<int8_t>(r.segment_ids[t]));
    }
    for (size_t j = 0; j < P; ++j) {
        a_.masked_lm_positions.push_back(static_cast<int32_t>(r.masked_lm_positions[j]));
        a_.masked_lm_ids.push_back(static_cast<int32_t>(r.masked_lm_ids[j]));
    }
    a_.next_sentence_labels.push_back(static_cast<int8_t>(r.next_sentence_labels));
    ++a_.records;
    ++records_;
}

void Hdf5ShardWriter::finish() {
    if (finished_) return;
    write_hdf5_temporary(*file_, a_);
    finished_ = true;
    a_ = Hdf5ShardArrays{};
}

std::unique_ptr<AtomicFile> Hdf5ShardWriter::stage() {
    BB_CHECK(file_ != nullptr);
    finish();
    return std::move(file_);
}

void Hdf5ShardWriter::close() {
    if (!file_) return;
    finish();
    file_->commit();
    file_.reset();
}

}  // namespace bertbench::io
