// The writer half of the hdf5_gen generator: a program of its own, started by hdf5_gen_fuzz,
// that reads recipes on stdin (a u32 length and the bytes, fuzz/hdf5_gen.hpp) and writes each as
// an NVIDIA shard with libhdf5 to argv[1] (scratch files beside it in argv[2]), answering one byte
// (1 written, 0 libhdf5 refused) on stdout. libhdf5's writer has bugs of its own on odd mixes of
// these parameters (a SEGV in its fixed array chunk index, heap blocks written after they were
// freed, 800 MB of chunk records): they are not the reader's concern, and in a process of their
// own they neither corrupt the fuzzer's heap nor leave libFuzzer crash files.
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "hdf5_gen.hpp"
#include "io/hdf5_shard.hpp"

using namespace bertbench;
namespace fs = std::filesystem;
using fuzz::hdf5_gen::Shape;

namespace {

// A deflate stream of 20 MiB of zeros (about 20 KiB): a chunk that inflates past any chunk size
// the reader accepts (16 MiB). Made on first use.
const std::string& deflate_bomb() {
    static const std::string bomb = [] {
        const std::vector<uint8_t> zeros(20u << 20, 0);
        uLongf n = compressBound(zeros.size());
        std::string out(n, '\0');
        if (compress2(reinterpret_cast<Bytef*>(out.data()), &n, zeros.data(), zeros.size(), 9) != Z_OK)
            std::abort();
        out.resize(n);
        return out;
    }();
    return bomb;
}

struct Hid {
    hid_t id;
    herr_t (*close)(hid_t);
    ~Hid() {
        if (id >= 0) close(id);
    }
    hid_t release() {
        const hid_t h = id;
        id = -1;
        return h;
    }
};

// A value for element `j` of a row of dataset `k`, mostly what a valid record holds.
int64_t value(fuzz::Recipe& r, size_t k, uint64_t j, int width) {
    if (r.one_in(64)) return r.hostile_i64(40);
    switch (k) {
        case 0: return j == 0 ? 2 : int64_t(r.upto(14));                      // input_ids
        case 1: return j < uint64_t(width) / 2 + 1 ? 1 : 0;                     // input_mask
        case 2: return j < uint64_t(width) / 2 ? 0 : 1;                         // segment_ids
        case 3: return j < 2 && j + 1 < uint64_t(width) ? int64_t(j + 1) : 0;   // positions
        case 4: return int64_t(r.upto(14));                                     // masked ids
        default: return int64_t(r.upto(1));                                     // labels
    }
}

// Writes one dataset as the recipe says (failures of libhdf5 leave it out or half written:
// the file is whatever libhdf5 made of it).
void make_dataset(fuzz::Recipe& r, hid_t file, size_t k, uint64_t rows, int T, int P,
                  const fs::path& dir) {
    const io::Hdf5DatasetSpec& s = io::kHdf5Datasets[k];
    static const std::array<hid_t, 8> kTypes{H5T_STD_I32LE, H5T_STD_I64LE, H5T_STD_I32BE,
                                             H5T_STD_U8LE,  H5T_IEEE_F32LE, H5T_STD_I16LE,
                                             H5T_STD_I8LE,  H5T_STD_U32LE};
    hid_t type = s.bytes == 4 ? H5T_STD_I32LE : H5T_STD_I8LE;
    if (r.one_in(16)) type = r.pick(kTypes);
    const int width = s.width == io::Hdf5DatasetSpec::Width::seq    ? T
                      : s.width == io::Hdf5DatasetSpec::Width::pred ? P
                                                                      : 0;
    std::vector<hsize_t> dims{rows};
    if (width > 0) dims.push_back(hsize_t(width));
    if (r.one_in(24)) dims.back() += 1;
    if (r.one_in(32)) dims.push_back(1);
    const bool scalar = r.one_in(48);
    std::vector<hsize_t> maxdims = dims;
    if (r.flip()) maxdims[0] = H5S_UNLIMITED;
    const size_t row_bytes = H5Tget_size(type) * (width > 0 ? size_t(width) : 1);
    const uint64_t total_bytes = rows > (1ull << 40) / row_bytes ? ~0ull : rows * row_bytes;

    enum { contiguous, chunked, compact, virt, external } layout = chunked;
    switch (r.upto(15)) {
        case 0: case 1: case 2: layout = contiguous; break;
        case 3: layout = compact; break;
        case 4: layout = virt; break;
        case 5: layout = external; break;
        default: break;
    }
    if (maxdims[0] == H5S_UNLIMITED && layout != chunked) maxdims[0] = dims[0];
    Hid space{scalar ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(int(dims.size()), dims.data(), maxdims.data()),
              H5Sclose};
    Hid dcpl{H5Pcreate(H5P_DATASET_CREATE), H5Pclose};
    std::vector<hsize_t> chunk(dims.size(), 1);
    bool deflate = false;
    if (layout == chunked && !scalar) {
        static constexpr std::array<uint64_t, 8> kRows{1, 2, 7, 64, 1024, 4096, 1u << 21, 3};
        chunk[0] = r.one_in(8) ? std::max<uint64_t>(1, rows) : r.pick(kRows);
        for (size_t d = 1; d < dims.size(); ++d) chunk[d] = r.one_in(8) ? 1 + r.upto(dims[d]) : std::max<hsize_t>(1, dims[d]);
        if (maxdims[0] != H5S_UNLIMITED) chunk[0] = std::min<hsize_t>(chunk[0], std::max<hsize_t>(1, dims[0]));
        H5Pset_chunk(dcpl.id, int(chunk.size()), chunk.data());
        if (r.flip()) H5Pset_shuffle(dcpl.id);
        if ((deflate = r.flip())) H5Pset_deflate(dcpl.id, unsigned(r.upto(9)));
        if (r.one_in(4)) H5Pset_fletcher32(dcpl.id);
        if (r.one_in(16)) H5Pset_nbit(dcpl.id);
        if (r.one_in(16)) H5Pset_scaleoffset(dcpl.id, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT);
        if (r.one_in(16)) H5Pset_filter(dcpl.id, 307, H5Z_FLAG_OPTIONAL, 0, nullptr);
    } else if (layout == compact) {
        if (total_bytes > 60000) layout = contiguous;
        else H5Pset_layout(dcpl.id, H5D_COMPACT);
    } else if (layout == virt && !scalar) {
        static constexpr std::array<const char*, 3> kSource{".", ".", "other.h5"};
        const char* src_name = r.flip() ? s.name : io::kHdf5Datasets[r.upto(5)].name;
        Hid src{H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose};
        H5Pset_virtual(dcpl.id, space.id, r.pick(kSource), src_name, src.id);
    } else if (layout == external) {
        static constexpr std::array<const char*, 4> kFile{"ext.bin", "/dev/zero", "missing.bin", "shard.hdf5"};
        const std::string ext = (dir / "ext.bin").string();
        fuzz::write_file(ext, r.bytes(r.upto(4096)));
        const char* f = r.pick(kFile);
        H5Pset_external(dcpl.id, f[0] == '/' ? f : (dir / f).c_str(), off_t(r.upto(64)),
                        r.flip() ? H5F_UNLIMITED : hsize_t(r.hostile_u64(total_bytes)));
    }
    // Contiguous storage of a huge extent is never allocated here (it would be written out).
    const bool big = total_bytes > (4u << 20);
    if (r.one_in(4) && !big) H5Pset_alloc_time(dcpl.id, r.flip() ? H5D_ALLOC_TIME_EARLY : H5D_ALLOC_TIME_INCR);
    else if (layout == contiguous || layout == external) H5Pset_alloc_time(dcpl.id, H5D_ALLOC_TIME_LATE);
    if (r.one_in(6)) H5Pset_fill_time(dcpl.id, r.flip() ? H5D_FILL_TIME_NEVER : H5D_FILL_TIME_ALLOC);
    if (r.one_in(6)) {
        const int64_t fill = r.hostile_i64(3);
        H5Pset_fill_value(dcpl.id, H5T_NATIVE_INT64, &fill);
    }
    Hid ds{H5Dcreate2(file, s.name, type, space.id, H5P_DEFAULT, dcpl.id, H5P_DEFAULT), H5Dclose};
    if (ds.id < 0 || scalar || layout == virt) return;

    // Rows written: all of a small extent, else a few; big chunks go in raw (direct writes).
    uint64_t chunk_bytes = H5Tget_size(type);
    for (hsize_t c : chunk) chunk_bytes *= c;
    if (layout == chunked && (chunk_bytes > (1u << 20) || r.one_in(8))) {
        const uint64_t n = 1 + r.upto(3);
        for (uint64_t c = 0; c < n; ++c) {
            std::vector<hsize_t> offset(dims.size(), 0);
            offset[0] = c * chunk[0];
            const std::string raw = deflate && r.flip() ? deflate_bomb() : r.bytes(r.upto(chunk_bytes > 4096 ? 4096 : chunk_bytes));
            H5Dwrite_chunk(ds.id, H5P_DEFAULT, r.one_in(8) ? 1u : 0u, offset.data(), raw.size(), raw.data());
        }
        return;
    }
    if (big && layout != chunked) return;
    uint64_t written = rows;
    if (big || r.one_in(6)) written = std::min<uint64_t>(rows, r.upto(2048 * 1024 / std::max<size_t>(row_bytes, 1)));
    if (written == 0) return;
    const uint64_t per_row = width > 0 ? uint64_t(width) : 1;
    if (dims.size() > 2 || (width > 0 && dims[1] != hsize_t(width))) return;  // odd shapes stay empty
    std::vector<int64_t> v(written * per_row);
    for (uint64_t i = 0; i < v.size(); ++i) v[i] = value(r, k, i % per_row, width);
    std::vector<hsize_t> start(dims.size(), 0), count = dims;
    count[0] = written;
    Hid mem{H5Screate_simple(int(count.size()), count.data(), nullptr), H5Sclose};
    Hid fsel{H5Dget_space(ds.id), H5Sclose};
    H5Sselect_hyperslab(fsel.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    H5Dwrite(ds.id, H5T_NATIVE_INT64, mem.id, fsel.id, H5P_DEFAULT, v.data());
}

// Writes the shard of recipe `data` to `path`; false when libhdf5 failed.
bool write_shard(const std::string& data, const std::string& path, const fs::path& dir) {
    fuzz::Recipe r(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    const Shape s = fuzz::hdf5_gen::draw_shape(r);
    Hid fapl{H5Pcreate(H5P_FILE_ACCESS), H5Pclose};
    if (r.flip()) H5Pset_libver_bounds(fapl.id, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    Hid file{H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id), H5Fclose};
    if (file.id < 0) return false;
    for (size_t k = 0; k < io::kHdf5Datasets.size(); ++k) {
        if (r.one_in(32)) continue;  // missing
        if (r.one_in(64)) {          // a group of that name
            Hid g{H5Gcreate2(file.id, io::kHdf5Datasets[k].name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
            continue;
        }
        make_dataset(r, file.id, k, s.rows, s.T, s.P, dir);
    }
    return H5Fclose(file.release()) >= 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    uint32_t n = 0;
    std::string data;
    while (fuzz::hdf5_gen::read_all(0, &n, 4)) {
        data.resize(n);
        if (!fuzz::hdf5_gen::read_all(0, data.data(), n)) break;
        const char ok = write_shard(data, argv[1], argv[2]) ? 1 : 0;
        if (!fuzz::hdf5_gen::write_all(1, &ok, 1)) break;
    }
    return 0;
}
