// The storage of an NVIDIA HDF5 shard's datasets and their chunks, checked before libhdf5 reads a
// value (see hdf5_storage.hpp): where the bytes live, the filters they pass through, what one
// chunk costs, and each deflated chunk inflated here, counting, before libhdf5 inflates it.
#include "io/hdf5_storage.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "io/hdf5_lib.hpp"

namespace bertbench::io::h5 {

std::string shape_str(const std::vector<uint64_t>& d) {
    std::string s = "(";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + (d.size() == 1 ? ",)" : ")");
}

namespace {

const char* layout_name(H5D_layout_t l) {
    switch (l) {
        case H5D_COMPACT: return "compact";
        case H5D_CONTIGUOUS: return "contiguous";
        case H5D_CHUNKED: return "chunked";
        case H5D_VIRTUAL: return "a virtual dataset (its values are mapped from other datasets or files)";
        default: return "an unknown layout";
    }
}

}  // namespace

// The storage of one dataset, checked before any value is read: where its bytes live, which
// filters they pass through, and how much memory one chunk takes. Returns the chunk's bytes
// (0: not chunked). `dims` and `type_size` passed the schema check.
// `file_size`: the file's length; `held`: the bytes it holds (holes of a sparse file left out).
Hdf5DatasetStorage check_storage(const std::string& path, const char* name, hid_t ds, hid_t dcpl,
                       const std::vector<uint64_t>& dims, size_t type_size, uint64_t file_size,
                       uint64_t held) {
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED)
        fail(
            "[hdf5] {}: dataset {}: expected values stored in the file (contiguous, chunked or "
            "compact layout), got {} (hint: write the values into the shard, e.g. h5py "
            "create_dataset(data=...))",
            path, name, layout_name(layout));
    const int external = H5Pget_external_count(dcpl);
    if (external != 0)
        fail(
            "[hdf5] {}: dataset {}: expected values stored in the file, got external storage in "
            "{} other file(s) (hint: write the values into the shard)",
            path, name, external < 0 ? 1 : external);
    const int nfilters = H5Pget_nfilters(dcpl);
    if (nfilters < 0)
        fail("[hdf5] {}: dataset {}: cannot read its filters ({})", path, name, hdf5_error());
    Hdf5DatasetStorage st;
    for (int f = 0; f < nfilters; ++f) {
        unsigned flags = 0, cd[8] = {};
        size_t ncd = 8;
        char fname[64] = {};
        const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(f), &flags, &ncd, cd,
                                               sizeof fname, fname, nullptr);
        fname[sizeof fname - 1] = '\0';
        for (char& c : fname)
            if (c != '\0' && (c < 0x20 || c > 0x7e)) c = '?';
        // nbit and scaleoffset size their output from parameters stored in the file; other ids
        // would be looked for as plugins.
        if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
            fail(
                "[hdf5] {}: dataset {}: expected no filter or gzip/deflate, shuffle, fletcher32 "
                "(built into libhdf5), got filter {}{} (no other: neither libhdf5's nbit, "
                "scale-offset or szip nor filter plugins such as lzf; hint: rewrite the shard "
                "with gzip, as NVIDIA's writer does)",
                path, name, static_cast<int>(id),
                fname[0] != '\0' ? fmt::format(" (\"{}\")", fname) : std::string());
        // h5py's order: shuffle, deflate, fletcher32; the bomb check inflates what is stored.
        const bool ordered = id == H5Z_FILTER_SHUFFLE ? st.deflate < 0 && st.fletcher32 < 0
                             : id == H5Z_FILTER_DEFLATE ? st.deflate < 0 && st.fletcher32 < 0
                                                        : st.fletcher32 < 0;
        if (!ordered)
            fail(
                "[hdf5] {}: dataset {}: expected filters in h5py's order (shuffle, gzip, "
                "fletcher32, each at most once), got filter {} at position {}",
                path, name, static_cast<int>(id), f);
        if (id == H5Z_FILTER_DEFLATE) st.deflate = f;
        if (id == H5Z_FILTER_FLETCHER32) st.fletcher32 = f;
    }
    uint64_t elements = 1;
    for (uint64_t d : dims)
        if (__builtin_mul_overflow(elements, d, &elements))
            fail("[hdf5] {}: dataset {}: {} elements overflow a 64-bit count", path, name,
                 shape_str(dims));
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(type_size), &bytes))
        fail("[hdf5] {}: dataset {}: {} elements of {} bytes overflow a 64-bit count", path, name,
             elements, type_size);
    if (layout == H5D_CONTIGUOUS) {
        // Stored uncompressed, all or nothing: every declared byte must lie inside the file.
        const uint64_t stored = H5Dget_storage_size(ds);
        const haddr_t at = H5Dget_offset(ds);
        if (bytes > 0 && (stored != bytes || at == HADDR_UNDEF || at > file_size ||
                          file_size - at < bytes))
            fail(
                "[hdf5] {}: dataset {}: expected its {} values ({} bytes) stored in the file's {} "
                "bytes, got {} (hint: the shard was never fully written, or is truncated)",
                path, name, elements, bytes, file_size,
                stored == 0 || at == HADDR_UNDEF
                    ? std::string("none written")
                    : fmt::format("{} bytes at offset {}", stored, at));
        return st;
    }
    if (layout == H5D_COMPACT) return st;  // inside the object header: at most 64 KiB
    {  // the chunk index's addresses count from the file's base (after a user block, if any)
        Handle file(H5Iget_file_id(ds), H5Fclose);
        Handle fcpl(file.ok() ? H5Fget_create_plist(file.get()) : -1, H5Pclose);
        hsize_t base = 0;
        if (!fcpl.ok() || H5Pget_userblock(fcpl.get(), &base) < 0)
            fail("[hdf5] {}: dataset {}: cannot read the file's layout ({})", path, name, hdf5_error());
        st.file_base = base;
    }
    std::vector<hsize_t> chunk(dims.size());
    if (H5Pget_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) !=
        static_cast<int>(dims.size()))
        fail("[hdf5] {}: dataset {}: cannot read its chunk shape ({})", path, name, hdf5_error());
    uint64_t chunk_bytes = type_size, chunks = elements == 0 ? 0 : 1;
    for (size_t i = 0; i < dims.size(); ++i) {
        if (chunk[i] == 0 || __builtin_mul_overflow(chunk_bytes, chunk[i], &chunk_bytes))
            chunk_bytes = UINT64_MAX;
        if (chunk[i] != 0) chunks *= (dims[i] + chunk[i] - 1) / chunk[i];  // <= elements
    }
    if (chunk_bytes > kHdf5MaxChunkBytes)
        fail(
            "[hdf5] {}: dataset {}: expected chunks of at most {} MiB (libhdf5 decompresses a "
            "chunk whole; h5py writes <= 1 MiB), got chunk shape {} of {} bytes",
            path, name, kHdf5MaxChunkBytes >> 20,
            shape_str(std::vector<uint64_t>(chunk.begin(), chunk.end())),
            chunk_bytes == UINT64_MAX ? std::string("more than 2^64")
                                      : std::to_string(chunk_bytes));
    // Every written chunk takes at least one byte of the file, so more chunks than the file holds
    // bytes cannot all be there; and libhdf5 counts them (below) by walking the whole declared
    // index: a fixed-array index of 2^40 one-row chunks took minutes (found by the hdf5_gen
    // generator). Its file holds a few KB but is 8.8 TB long (sparse: the index's reserved
    // address space), so the count is bounded by the bytes held before libhdf5 is asked.
    if (chunks > held)
        fail(
            "[hdf5] {}: dataset {}: expected all {} chunks of its {} extent written, got a file "
            "holding {} bytes, too few for them (rows declared but never written: a shard cut "
            "short, or written sparsely; NVIDIA's writer writes every chunk)",
            path, name, chunks, shape_str(dims), held);
    const uint64_t stored = H5Dget_storage_size(ds);
    Handle space(H5Dget_space(ds), H5Sclose);
    hsize_t written = 0;
    if (!space.ok() || H5Dget_num_chunks(ds, space.get(), &written) < 0)
        fail("[hdf5] {}: dataset {}: cannot count its chunks ({})", path, name, hdf5_error());
    if (written < chunks || stored > file_size)
        fail(
            "[hdf5] {}: dataset {}: expected all {} chunks of its {} extent written, got {} "
            "chunks of {} bytes in a {}-byte file (rows declared but never written: a shard cut "
            "short, or written sparsely; NVIDIA's writer writes every chunk)",
            path, name, chunks, shape_str(dims), written, stored, file_size);
    st.chunk_bytes = chunk_bytes;
    st.chunk.assign(chunk.begin(), chunk.end());
    return st;
}

// The stored chunk at `offset` must decode to exactly its own size (st.chunk_bytes) before
// libhdf5 reads it: libhdf5 copies a whole chunk out of whatever its filters returned, so a chunk
// stored shorter (written directly, or deflating to fewer bytes) was read past its buffer (found
// by the hdf5_gen generator), and libhdf5's deflate grows its buffer to the stream's end (a
// decompression bomb). The chunk index's record says where the chunk lies (inside the file),
// how many bytes it has and which filters were applied: unfiltered, shuffled or checksummed
// chunks are checked by that size, a deflated one is read and inflated here into 64 KiB at a
// time, counting. Memory: the chunk's stored bytes plus 64 KiB, only for deflated chunks.
void check_chunk(const std::string& path, const char* name, hid_t ds, const Hdf5DatasetStorage& st,
                 const std::vector<hsize_t>& offset, uint64_t file_size) {
    const auto where = [&] { return shape_str(std::vector<uint64_t>(offset.begin(), offset.end())); };
    // The chunk index's own record (H5Dget_chunk_storage_size reports the chunk shape's size for
    // an unfiltered dataset, whatever was stored).
    unsigned skipped = 0;  // bit i: filter i was not applied to this chunk
    haddr_t at = HADDR_UNDEF;
    hsize_t nbytes = 0;
    if (H5Dget_chunk_info_by_coord(ds, offset.data(), &skipped, &at, &nbytes) < 0 ||
        at == HADDR_UNDEF)
        fail("[hdf5] {}: dataset {}: cannot find the chunk at {} ({})", path, name, where(),
             hdf5_error());
    // A read finds each chunk by searching the index's keys, where the lookup above walks its
    // entries: a damaged key can hide a chunk from the search, and the read then fills its rows
    // with the fill value (zeros), silently. The search must find it too.
    hsize_t searched = 0;
    if (H5Dget_chunk_storage_size(ds, offset.data(), &searched) < 0 || searched == 0)
        fail("[hdf5] {}: dataset {}: expected the chunk index to lead to the chunk at {}, which it "
             "lists; a search does not find it (a damaged key: the file is corrupt)",
             path, name, where());
    const uint64_t base = st.file_base;
    if (base > file_size || at > file_size - base || nbytes > file_size - base - at || nbytes > UINT32_MAX)
        fail("[hdf5] {}: dataset {}: expected the chunk at {} stored inside the file's {} bytes, "
             "got {} bytes at offset {} (the file is corrupt or truncated)",
             path, name, where(), file_size, nbytes, base + at);
    const auto applied = [&](int f) { return f >= 0 && ((skipped >> f) & 1u) == 0; };
    const uint64_t check = applied(st.fletcher32) ? 4 : 0;  // fletcher32 appends its checksum
    if (!applied(st.deflate)) {
        if (nbytes != st.chunk_bytes + check)
            fail("[hdf5] {}: dataset {}: expected the chunk at {} stored as its {} bytes{}, got {} "
                 "bytes (the file is corrupt)",
                 path, name, where(), st.chunk_bytes, check ? " plus a 4-byte checksum" : "",
                 nbytes);
        return;
    }
    // The stored bytes, read here from where the index says (H5Dread_chunk sizes its copy by a
    // lookup of its own, which a damaged index let run past a buffer of the size reported here).
    std::vector<unsigned char> raw(static_cast<size_t>(nbytes));
    std::string why;
    const int fd = open_regular_file(path, &why);
    if (fd < 0) fail("[hdf5] {}: {}", path, why);
    const ssize_t got = nbytes > 0 ? ::pread(fd, raw.data(), raw.size(), static_cast<off_t>(base + at)) : 0;
    ::close(fd);
    if (got != static_cast<ssize_t>(raw.size()))
        fail("[hdf5] {}: dataset {}: cannot read the {}-byte chunk at offset {} (hint: the file is corrupt or "
             "truncated)", path, name, nbytes, base + at);
    unsigned char scratch[64 * 1024];
    z_stream z{};
    z.next_in = raw.data();
    z.avail_in = static_cast<uInt>(raw.size() >= check ? raw.size() - check : 0);
    int status = inflateInit(&z);
    uint64_t total = 0;
    while (status == Z_OK) {
        z.next_out = scratch;
        z.avail_out = sizeof scratch;
        status = inflate(&z, Z_NO_FLUSH);
        total += sizeof scratch - z.avail_out;
        if (total > st.chunk_bytes) break;
        if (status == Z_BUF_ERROR && z.avail_in == 0) break;  // the stream ends early
    }
    const std::string zmsg = z.msg != nullptr ? z.msg : "incomplete stream";
    inflateEnd(&z);
    if (total > st.chunk_bytes)
        fail(
            "[hdf5] {}: dataset {}: expected a chunk inflating to at most its {} bytes, got a "
            "{}-byte deflate stream yielding more (a decompression bomb, or a corrupt file)",
            path, name, st.chunk_bytes, nbytes);
    if (status != Z_STREAM_END)
        fail("[hdf5] {}: dataset {}: a {}-byte deflate chunk does not inflate ({}; hint: the file "
             "is corrupt or truncated)",
             path, name, nbytes, zmsg);
    if (total != st.chunk_bytes)
        fail("[hdf5] {}: dataset {}: expected the chunk at {} to inflate to its {} bytes, got {} "
             "(the file is corrupt)",
             path, name, where(), st.chunk_bytes, total);
}

}  // namespace bertbench::io::h5
