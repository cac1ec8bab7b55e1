// NVIDIA HDF5 shards (see hdf5_shard.hpp). libhdf5 is called under one process-wide mutex (its
// thread-safe build serialises calls anyway; the mutex also covers a non-thread-safe build), with
// automatic error printing off on the calling thread; a failed call's error stack is turned into
// the innermost libhdf5 message inside our one-line error. Everything after libhdf5 returns
// arrays (check_hdf5_schema, check_hdf5_arrays, decode_hdf5_record) is plain C++ and fuzzed.
// libhdf5's deflate filter grows its buffer for as long as the stream yields bytes (a 1 MB chunk
// inflated to 1 GB), and 1.10 cannot replace a predefined filter: so before libhdf5 reads a
// compressed chunk, the chunk's raw bytes are inflated into a small scratch buffer (hdf5_storage.cpp), counting,
// and refused past the chunk's size. Dynamic filter plugins are switched off.
#include "io/hdf5_shard.hpp"

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/hdf5_lib.hpp"
#include "io/hdf5_storage.hpp"

namespace bertbench::io {
using namespace h5;
namespace {

std::string type_name(hid_t type, bool with_order) {
    const H5T_class_t cls = H5Tget_class(type);
    const size_t bits = H5Tget_size(type) * 8;
    std::string s;
    switch (cls) {
        case H5T_INTEGER:
            s = fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
            break;
        case H5T_FLOAT:
            s = fmt::format("float{}", bits);
            break;
        case H5T_STRING:
            return "string";
        case H5T_COMPOUND:
            return "compound";
        case H5T_ENUM:
            return "enum";
        case H5T_ARRAY:
            return "array";
        case H5T_VLEN:
            return "vlen";
        case H5T_REFERENCE:
            return "reference";
        case H5T_OPAQUE:
            return "opaque";
        case H5T_BITFIELD:
            return fmt::format("bitfield{}", bits);
        default:
            return "unknown type";
    }
    if (with_order) s += H5Tget_order(type) == H5T_ORDER_BE ? " BE" : " LE";
    return s;
}

// h5py's numpy bool: an enum of one byte whose members are FALSE = 0 and TRUE = 1.
bool is_h5py_bool(hid_t type) {
    if (H5Tget_class(type) != H5T_ENUM || H5Tget_size(type) != 1 || H5Tget_nmembers(type) != 2) return false;
    for (unsigned k = 0; k < 2; ++k) {
        char* name = H5Tget_member_name(type, k);
        const bool named = name != nullptr && std::string_view(name) == (k == 0 ? "FALSE" : "TRUE");
        H5free_memory(name);
        signed char value = -1;
        if (!named || H5Tget_member_value(type, k, &value) < 0 || value != static_cast<signed char>(k)) return false;
    }
    return true;
}

uint64_t physical_memory() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return UINT64_MAX;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

// Reads rows [first, first + count) of a rank-1 or rank-2 dataset (width columns; 0: rank 1),
// after checking every chunk those rows touch (check_chunk).
template <typename T>
void read_rows_of(const std::string& path, hid_t file, const char* name, hid_t mem_type,
                  uint64_t first, uint64_t count, uint64_t width, const Hdf5DatasetStorage& st,
                  uint64_t file_size, std::vector<T>& out) {
    out.resize(static_cast<size_t>(count * std::max<uint64_t>(width, 1)));
    if (count == 0) return;
    Handle ds(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) fail("[hdf5] {}: dataset {}: cannot open ({})", path, name, hdf5_error());
    if (st.chunk_bytes > 0) {
        const uint64_t c0 = st.chunk[0], c1 = width == 0 ? 1 : st.chunk[1];
        for (uint64_t r = first / c0 * c0; r < first + count; r += c0)
            for (uint64_t c = 0; c < std::max<uint64_t>(width, 1); c += c1)
                check_chunk(path, name, ds.get(), st,
                                     width == 0 ? std::vector<hsize_t>{r}
                                                : std::vector<hsize_t>{r, c},
                                     file_size);
    }
    // h5py's bool (the schema check let it through for one-byte arrays only) is read as stored,
    // 0 and 1: libhdf5 converts no enum to an integer
    Handle file_type(H5Dget_type(ds.get()), H5Tclose);
    Handle native_enum(file_type.ok() && is_h5py_bool(file_type.get())
                           ? H5Tget_native_type(file_type.get(), H5T_DIR_DEFAULT)
                           : H5I_INVALID_HID,
                       H5Tclose);
    if (native_enum.ok()) mem_type = native_enum.get();
    Handle fspace(H5Dget_space(ds.get()), H5Sclose);
    const int rank = width == 0 ? 1 : 2;
    const hsize_t start[2] = {first, 0}, n[2] = {count, width};
    Handle mspace(H5Screate_simple(rank, n, nullptr), H5Sclose);
    if (!fspace.ok() || !mspace.ok() ||
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, n, nullptr) < 0)
        fail("[hdf5] {}: dataset {}: cannot select rows {}..{} ({})", path, name, first,
             first + count, hdf5_error());
    if (H5Dread(ds.get(), mem_type, mspace.get(), fspace.get(), H5P_DEFAULT, out.data()) < 0)
        fail(
            "[hdf5] {}: dataset {}: cannot read rows {}..{} ({}; hint: the file is corrupt or "
            "truncated)",
            path, name, first, first + count, hdf5_error());
}

}  // namespace

bool is_hdf5_path(std::string_view path) {
    auto ends = [&](std::string_view ext) {
        if (path.size() < ext.size()) return false;
        const std::string_view tail = path.substr(path.size() - ext.size());
        return std::equal(tail.begin(), tail.end(), ext.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == b;
        });
    };
    return ends(".hdf5") || ends(".h5");
}

uint64_t check_hdf5_schema(std::string_view path, const std::array<Hdf5DatasetInfo, 6>& info,
                           int max_seq_length, int max_predictions_per_seq) {
    uint64_t n = 0;
    for (size_t k = 0; k < kHdf5Datasets.size(); ++k) {
        const Hdf5DatasetSpec& s = kHdf5Datasets[k];
        const Hdf5DatasetInfo& d = info[k];
        const std::string want_type = fmt::format("int{}", s.bytes * 8);
        if (!d.found)
            fail(
                "[hdf5] {}: dataset {}: expected an {} dataset in the root group, got none (hint: "
                "NVIDIA's schema has input_ids, input_mask, segment_ids, masked_lm_positions, "
                "masked_lm_ids, next_sentence_labels)",
                path, s.name, want_type);
        // Any integer width, as NVIDIA's loader (astype(np.int64)); values beyond the int32/int8
        // the arrays hold read as that type's limit (libhdf5 saturates), which no value check
        // passes.
        const size_t w = d.type_size;
        if (d.is_bool && s.bytes == 1) {
            // h5py's bool as 0 and 1
        } else if (!d.is_integer || !(w == 1 || w == 2 || w == 4 || w == 8))
            fail("[hdf5] {}: dataset {}: expected an integer dtype (NVIDIA's writer: {}, i{}), "
                 "got {}", path, s.name, want_type, s.bytes,
                 d.type_name.empty() ? "an unknown type" : d.type_name);
        const size_t rank = s.width == Hdf5DatasetSpec::Width::none ? 1 : 2;
        const uint64_t width = s.width == Hdf5DatasetSpec::Width::seq
                                   ? static_cast<uint64_t>(max_seq_length)
                                   : static_cast<uint64_t>(max_predictions_per_seq);
        const char* flag = s.width == Hdf5DatasetSpec::Width::seq ? "--max_seq_length"
                                                                  : "--max_predictions_per_seq";
        const std::string want_shape =
            rank == 1 ? "(N,)" : fmt::format("(N, {}) (N records, {} = {})", width, flag, width);
        if (!d.simple || d.dims.size() != rank)
            fail("[hdf5] {}: dataset {}: expected shape {}, got {}", path, s.name, want_shape,
                 d.simple ? shape_str(d.dims) : std::string("a scalar or empty dataspace"));
        if (rank == 2 && d.dims[1] != width)
            fail(
                "[hdf5] {}: dataset {}: expected shape {}, got {} (hint: the shard was made with "
                "another {})",
                path, s.name, want_shape, shape_str(d.dims), flag);
        if (k == 0) n = d.dims[0];
        if (d.dims[0] != n)
            fail(
                "[hdf5] {}: dataset {}: expected {} records (the first dimension of input_ids), "
                "got {}",
                path, s.name, n, d.dims[0]);
    }
    return n;
}

void check_hdf5_arrays(std::string_view path, const Hdf5ShardArrays& a) {
    if (a.max_seq_length <= 0 || a.max_predictions_per_seq <= 0)
        fail("[hdf5] {}: expected max_seq_length and max_predictions_per_seq > 0, got {} and {}",
             path, a.max_seq_length, a.max_predictions_per_seq);
    const uint64_t n = a.records;
    const uint64_t T = static_cast<uint64_t>(a.max_seq_length);
    const uint64_t P = static_cast<uint64_t>(a.max_predictions_per_seq);
    uint64_t nt = 0, np = 0;
    if (__builtin_mul_overflow(n, T, &nt) || __builtin_mul_overflow(n, P, &np))
        fail("[hdf5] {}: {} records of {}/{} values overflow a 64-bit count", path, n, T, P);
    auto check = [&](const char* name, size_t got, uint64_t want) {
        if (got != want)
            fail("[hdf5] {}: dataset {}: expected {} values ({} records), got {}", path, name, want,
                 n, got);
    };
    check("input_ids", a.input_ids.size(), nt);
    check("input_mask", a.input_mask.size(), nt);
    check("segment_ids", a.segment_ids.size(), nt);
    check("masked_lm_positions", a.masked_lm_positions.size(), np);
    check("masked_lm_ids", a.masked_lm_ids.size(), np);
    check("next_sentence_labels", a.next_sentence_labels.size(), n);
}

void decode_hdf5_record(const Hdf5ShardArrays& a, uint64_t i, std::string_view where,
                        PretrainingRecord& out) {
    if (i >= a.records)
        fail("{}: record index {}: expected < {} (the records in the shard)", where, i, a.records);
    const size_t T = static_cast<size_t>(a.max_seq_length);
    const size_t P = static_cast<size_t>(a.max_predictions_per_seq);
    const size_t t0 = static_cast<size_t>(i) * T, p0 = static_cast<size_t>(i) * P;
    out.input_ids.resize(T);
    out.input_mask.resize(T);
    out.segment_ids.resize(T);
    for (size_t t = 0; t < T; ++t) {
        const int32_t id = a.input_ids[t0 + t];
        const int8_t mask = a.input_mask[t0 + t], seg = a.segment_ids[t0 + t];
        if (id < 0)
            fail("{}: dataset input_ids: expected token ids >= 0, got {} at position {}", where, id,
                 t);
        if (mask != 0 && mask != 1)
            fail("{}: dataset input_mask: expected 0 or 1, got {} at position {}", where, mask, t);
        if (seg < 0)
            fail("{}: dataset segment_ids: expected segment ids >= 0, got {} at position {}", where,
                 seg, t);
        out.input_ids[t] = id;
        out.input_mask[t] = mask;
        out.segment_ids[t] = seg;
    }
    // NVIDIA's rule: the predictions before the first position 0 are used (position 0 is [CLS],
    // never masked, so 0 can only be padding); all P when there is no 0.
    size_t used = P;
    for (size_t j = 0; j < P; ++j)
        if (a.masked_lm_positions[p0 + j] == 0) {
            used = j;
            break;
        }
    out.masked_lm_positions.resize(P);
    out.masked_lm_ids.resize(P);
    out.masked_lm_weights.resize(P);
    for (size_t j = 0; j < P; ++j) {
        const int32_t pos = a.masked_lm_positions[p0 + j], id = a.masked_lm_ids[p0 + j];
        if (j < used) {
            if (pos < 1 || static_cast<size_t>(pos) >= T)
                fail(
                    "{}: dataset masked_lm_positions: expected a position in [1, {}) (0 marks "
                    "padding), got {} at index {}",
                    where, T, pos, j);
            if (id < 0)
                fail("{}: dataset masked_lm_ids: expected token ids >= 0, got {} at index {}",
                     where, id, j);
        }
        out.masked_lm_positions[j] = pos;
        out.masked_lm_ids[j] = id;
        out.masked_lm_weights[j] = j < used ? 1.0f : 0.0f;
    }
    // A position listed twice counts once, with its last id: NVIDIA's loader writes the ids into
    // one label per token (masked_lm_labels[positions] = ids), the last write kept. (A TFRecord's
    // duplicates count twice, as run_pretraining.py gathers them; NVIDIA's writer makes none.)
    for (size_t j = 0; j < used; ++j)
        for (size_t k = j + 1; k < used; ++k)
            if (out.masked_lm_positions[k] == out.masked_lm_positions[j]) {
                out.masked_lm_weights[j] = 0.0f;
                break;
            }
    const int8_t nsl = a.next_sentence_labels[static_cast<size_t>(i)];
    if (nsl != 0 && nsl != 1)
        fail("{}: dataset next_sentence_labels: expected 0 or 1, got {}", where, nsl);
    out.next_sentence_labels = nsl;
}

Hdf5ShardReader::Hdf5ShardReader(const std::string& path, int max_seq_length,
                                 int max_predictions_per_seq, bool predictions_up_to)
    : path_(path), max_seq_length_(max_seq_length), max_predictions_per_seq_(max_predictions_per_seq) {
    uint64_t file_size = 0, held = 0;
    {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(path, ec))
            fail("[hdf5] {}: cannot open: {}", path,
                 std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
        std::FILE* f = std::fopen(path.c_str(), "rb");
        if (f == nullptr) fail("[hdf5] {}: cannot open: {}", path, std::strerror(errno));
        struct stat st {};
        const int rc = ::fstat(fileno(f), &st);
        std::fclose(f);
        if (rc != 0) fail("[hdf5] {}: cannot open: {}", path, std::strerror(errno));
        // Also the bytes it holds, holes left out: libhdf5 reserves address space for a chunk
        // index as large as the declared chunk count, so a 40 KB shard declaring 2^40 chunks is
        // an 8.8 TB sparse file (found by the hdf5_gen generator); the chunk count is bounded by
        // these. (A file system that reports no blocks: its length.)
        file_size = held = static_cast<uint64_t>(st.st_size);
        const uint64_t blocks = static_cast<uint64_t>(st.st_blocks) * 512;
        if (st.st_blocks > 0 && blocks < held) held = blocks;
    }
    Hdf5Lock lock;
    const Hdf5CrashGuard guard(path);
    const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
    if (is_hdf5 == 0)
        fail(
            "[hdf5] {}: expected an HDF5 file, got no HDF5 signature (hint: files named .hdf5/.h5 "
            "are read as NVIDIA HDF5 shards, all others as TFRecords)",
            path);
    if (is_hdf5 < 0) fail("[hdf5] {}: cannot open: {}", path, hdf5_error());
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.ok())
        fail("[hdf5] {}: cannot open as HDF5 ({}; hint: the file is corrupt or truncated)", path,
             hdf5_error());

    // A dataset reached through an external link lives in another file: the storage checks below
    // measure offsets against this file's size, so it is refused by its object's file number.
    H5O_info_t root;
    if (H5Oget_info_by_name2(file.get(), "/", &root, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        fail("[hdf5] {}: cannot read its root group ({})", path, hdf5_error());
    std::array<Hdf5DatasetInfo, 6> info;
    std::array<Handle, 6> datasets, dcpls;
    for (size_t k = 0; k < kHdf5Datasets.size(); ++k) {
        const char* name = kHdf5Datasets[k].name;
        Hdf5DatasetInfo& d = info[k];
        const htri_t exists = H5Lexists(file.get(), name, H5P_DEFAULT);
        if (exists < 0)
            fail("[hdf5] {}: dataset {}: cannot look it up ({})", path, name, hdf5_error());
        if (exists == 0) continue;
        H5O_info_t oi;
        if (H5Oget_info_by_name2(file.get(), name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
            fail("[hdf5] {}: dataset {}: cannot open ({})", path, name, hdf5_error());
        if (oi.type != H5O_TYPE_DATASET)
            fail("[hdf5] {}: dataset {}: expected a dataset, got a {}", path, name,
                 oi.type == H5O_TYPE_GROUP ? "group" : "named datatype or other object");
        if (oi.fileno != root.fileno)
            fail("[hdf5] {}: dataset {}: expected its values in this file, got a link to another file "
                 "(an external link; hint: copy the values in, e.g. with h5py)", path, name);
        Handle ds(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose);
        if (!ds.ok()) fail("[hdf5] {}: dataset {}: cannot open ({})", path, name, hdf5_error());
        Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
        if (!dcpl.ok())
            fail("[hdf5] {}: dataset {}: cannot read its storage properties ({})", path, name,
                 hdf5_error());
        // A virtual dataset is refused before its extent is even asked for (a self-referencing
        // one recursed in libhdf5 until the stack overflowed).
        const H5D_layout_t layout = H5Pget_layout(dcpl.get());
        if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED)
            check_storage(path, name, ds.get(), dcpl.get(), {}, 1, file_size, held);  // fails
        Handle type(H5Dget_type(ds.get()), H5Tclose);
        Handle space(H5Dget_space(ds.get()), H5Sclose);
        if (!type.ok() || !space.ok())
            fail("[hdf5] {}: dataset {}: cannot read its type and shape ({})", path, name,
                 hdf5_error());
        d.found = true;
        d.is_integer = H5Tget_class(type.get()) == H5T_INTEGER;
        d.type_size = H5Tget_size(type.get());
        d.is_bool = is_h5py_bool(type.get());
        // Every bit of an integer significant (h5py and NVIDIA's writers): fewer (a damaged type
        // message) and libhdf5 reads the values as zeros or cut short, silently.
        if (d.is_integer && (H5Tget_precision(type.get()) != d.type_size * 8 || H5Tget_offset(type.get()) != 0))
            fail("[hdf5] {}: dataset {}: an integer of {} significant bits at bit {} of {}, expected all {} bits "
                 "(a damaged file?)", path, name, H5Tget_precision(type.get()), H5Tget_offset(type.get()),
                 type_name(type.get(), false), d.type_size * 8);
        d.type_name = d.is_bool ? "bool (h5py's enum FALSE/TRUE)" : type_name(type.get(), false);
        d.simple = H5Sget_simple_extent_type(space.get()) == H5S_SIMPLE;
        const int rank = H5Sget_simple_extent_ndims(space.get());
        if (rank < 0 || rank > 32)
            fail("[hdf5] {}: dataset {}: cannot read its shape ({})", path, name, hdf5_error());
        std::vector<hsize_t> dims(static_cast<size_t>(rank));
        if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
            fail("[hdf5] {}: dataset {}: cannot read its shape ({})", path, name, hdf5_error());
        d.dims.assign(dims.begin(), dims.end());
        datasets[k] = std::move(ds);
        dcpls[k] = std::move(dcpl);
    }
    // A width of 0 is the shard's own (input_ids' for the sequence, masked_lm_positions' for the
    // predictions); masked_lm_positions' width, when narrower than the flag allows, too. The
    // schema is then checked against it (every dataset of that width must have it).
    const auto own_width = [&](size_t k, int flag) {
        const Hdf5DatasetInfo& d = info[k];
        const bool rank2 = d.found && d.simple && d.dims.size() == 2 && d.dims[1] >= 1 &&
                           d.dims[1] <= static_cast<uint64_t>(std::numeric_limits<int>::max());
        return rank2 && (flag == 0 || (k == 3 && predictions_up_to &&
                                       d.dims[1] < static_cast<uint64_t>(flag)))
                   ? static_cast<int>(d.dims[1])
                   : flag;
    };
    max_seq_length_ = own_width(0, max_seq_length);
    max_predictions_per_seq_ = own_width(3, max_predictions_per_seq);
    records_ = check_hdf5_schema(path, info, max_seq_length_, max_predictions_per_seq_);
    for (size_t k = 0; k < kHdf5Datasets.size(); ++k)
        storage_[k] = check_storage(path, kHdf5Datasets[k].name, datasets[k].get(), dcpls[k].get(),
                                    info[k].dims, info[k].type_size, file_size, held);
    for (auto& h : datasets) h.reset();
    for (auto& h : dcpls) h.reset();
    file_size_ = file_size;
    file_ = file.release();  // closed by the destructor, under the lock
}

Hdf5ShardReader::~Hdf5ShardReader() {
    if (file_ < 0) return;
    Hdf5Lock lock;
    H5Fclose(file_);
}

uint64_t Hdf5ShardReader::block_rows() const {
    const uint64_t row = 6ull * static_cast<uint64_t>(max_seq_length_) +
                         8ull * static_cast<uint64_t>(max_predictions_per_seq_) + 1;
    return std::max<uint64_t>(1, kHdf5BlockBytes / row);
}

Hdf5ShardArrays Hdf5ShardReader::read_rows(uint64_t first, uint64_t count) const {
    if (first > records_ || count > records_ - first)
        fail("[hdf5] {}: rows {}..{}: expected rows within the shard's {}", path_, first,
             first + count, records_);
    Hdf5ShardArrays a;
    a.records = count;
    a.max_seq_length = max_seq_length_;
    a.max_predictions_per_seq = max_predictions_per_seq_;
    const uint64_t T = static_cast<uint64_t>(max_seq_length_);
    const uint64_t P = static_cast<uint64_t>(max_predictions_per_seq_);
    Hdf5Lock lock;
    const Hdf5CrashGuard guard(path_);
    const hid_t f = static_cast<hid_t>(file_);
    read_rows_of(path_, f, "input_ids", H5T_NATIVE_INT32, first, count, T, storage_[0], file_size_,
                 a.input_ids);
    read_rows_of(path_, f, "input_mask", H5T_NATIVE_INT8, first, count, T, storage_[1], file_size_,
                 a.input_mask);
    read_rows_of(path_, f, "segment_ids", H5T_NATIVE_INT8, first, count, T, storage_[2], file_size_,
                 a.segment_ids);
    read_rows_of(path_, f, "masked_lm_positions", H5T_NATIVE_INT32, first, count, P,
                 storage_[3], file_size_, a.masked_lm_positions);
    read_rows_of(path_, f, "masked_lm_ids", H5T_NATIVE_INT32, first, count, P, storage_[4], file_size_,
                 a.masked_lm_ids);
    read_rows_of(path_, f, "next_sentence_labels", H5T_NATIVE_INT8, first, count, 0,
                 storage_[5], file_size_, a.next_sentence_labels);
    return a;
}

Hdf5ShardArrays read_hdf5_shard(const std::string& path, int max_seq_length,
                                int max_predictions_per_seq) {
    const Hdf5ShardReader r(path, max_seq_length, max_predictions_per_seq);
    // Bytes in memory: N * (6T + 8P + 1), checked for overflow and against physical memory before
    // anything is allocated.
    const uint64_t n = r.records();
    const uint64_t row = 6ull * static_cast<uint64_t>(max_seq_length) +
                         8ull * static_cast<uint64_t>(max_predictions_per_seq) + 1;
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(n, row, &bytes) || bytes > physical_memory())
        fail(
            "[hdf5] {}: dataset input_ids: expected a shard that fits in memory ({:.1f} GB), got "
            "{} records of {} bytes (hint: split the shard)",
            path, physical_memory() / 1e9, n, row);
    Hdf5ShardArrays a = r.read_rows(0, n);
    check_hdf5_arrays(path, a);
    return a;
}

uint64_t verify_hdf5_shard(const std::string& path, int max_seq_length, int max_predictions_per_seq) {
    const Hdf5ShardReader r(path, max_seq_length, max_predictions_per_seq);
    const uint64_t n = r.records(), block = r.block_rows();
    for (uint64_t first = 0; first < n; first += block)
        check_hdf5_arrays(path, r.read_rows(first, std::min(block, n - first)));
    return n;
}

std::vector<Hdf5DatasetLayout> hdf5_layout(const std::string& path) {
    Hdf5Lock lock;
    const Hdf5CrashGuard guard(path);
    Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) fail("[hdf5] {}: cannot open as HDF5 ({})", path, hdf5_error());
    std::vector<std::string> names;
    H5Literate(
        file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
        [](hid_t, const char* name, const H5L_info_t*, void* data) -> herr_t {
            static_cast<std::vector<std::string>*>(data)->push_back(name);
            return 0;
        },
        &names);
    std::vector<Hdf5DatasetLayout> out;
    for (const auto& name : names) {
        Handle ds(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
        if (!ds.ok()) {
            H5Eclear2(H5E_DEFAULT);
            continue;  // a group or other object
        }
        Hdf5DatasetLayout l;
        l.name = name;
        Handle type(H5Dget_type(ds.get()), H5Tclose);
        Handle space(H5Dget_space(ds.get()), H5Sclose);
        Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
        if (!type.ok() || !space.ok() || !dcpl.ok())
            fail("[hdf5] {}: dataset {}: cannot inspect ({})", path, name, hdf5_error());
        l.type_name = type_name(type.get(), true);
        const int rank = H5Sget_simple_extent_ndims(space.get());
        std::vector<hsize_t> d(static_cast<size_t>(std::max(rank, 0)));
        if (rank > 0) H5Sget_simple_extent_dims(space.get(), d.data(), nullptr);
        l.shape.assign(d.begin(), d.end());
        if (H5Pget_layout(dcpl.get()) == H5D_CHUNKED) {
            std::vector<hsize_t> c(static_cast<size_t>(std::max(rank, 1)));
            const int cr = H5Pget_chunk(dcpl.get(), static_cast<int>(c.size()), c.data());
            if (cr > 0) l.chunks.assign(c.begin(), c.begin() + cr);
        }
        l.num_filters = H5Pget_nfilters(dcpl.get());
        for (int f = 0; f < l.num_filters; ++f) {
            unsigned flags = 0, cd[8] = {};
            size_t ncd = 8;
            char fname[64];
            const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(f), &flags,
                                                   &ncd, cd, sizeof fname, fname, nullptr);
            if (id == H5Z_FILTER_DEFLATE) l.deflate_level = ncd > 0 ? static_cast<int>(cd[0]) : -1;
            if (id == H5Z_FILTER_SHUFFLE) l.shuffle = true;
            if (id == H5Z_FILTER_FLETCHER32) l.fletcher32 = true;
        }
        H5D_fill_time_t ft;
        if (H5Pget_fill_time(dcpl.get(), &ft) >= 0) l.fill_time_alloc = ft == H5D_FILL_TIME_ALLOC;
        H5D_fill_value_t fv;
        if (H5Pfill_value_defined(dcpl.get(), &fv) >= 0)
            l.fill_value_default = fv == H5D_FILL_VALUE_DEFAULT;
        out.push_back(std::move(l));
    }
    return out;
}

}  // namespace bertbench::io
