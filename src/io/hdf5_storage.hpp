// The storage checks of an NVIDIA HDF5 shard (hdf5_shard.cpp's reader calls them under the
// library lock, before libhdf5 reads a value). Internal to src/io.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/hdf5_shard.hpp"

namespace bertbench::io::h5 {

// "(4, 128)", "(4,)": a shape as h5py prints it.
std::string shape_str(const std::vector<uint64_t>& d);

// The storage of one dataset, checked before any value is read: where its bytes live, which
// filters they pass through, and how much memory one chunk takes (0: not chunked). `dims` and
// `type_size` passed the schema check; `file_size`: the file's length; `held`: the bytes it holds
// (holes of a sparse file left out). Error naming the file and dataset otherwise.
Hdf5DatasetStorage check_storage(const std::string& path, const char* name, hid_t ds, hid_t dcpl,
                                 const std::vector<uint64_t>& dims, size_t type_size, uint64_t file_size,
                                 uint64_t held);

// The stored chunk at `offset` must decode to exactly its own size before libhdf5 reads it (see
// hdf5_storage.cpp): a deflated one is read from the file and inflated here, counting.
void check_chunk(const std::string& path, const char* name, hid_t ds, const Hdf5DatasetStorage& st,
                 const std::vector<hsize_t>& offset, uint64_t file_size);

}  // namespace bertbench::io::h5
