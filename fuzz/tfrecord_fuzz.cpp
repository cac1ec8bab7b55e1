// TFRecord framing (io/tfrecord.hpp), strict and with skip_corrupt (resync), and tf.train.Example
// decoding (io/example.hpp) of every record. The input is also decoded as one Example directly,
// so that mutations reach the protobuf decoder without having to fix up the record CRCs.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "io/example.hpp"
#include "io/tfrecord.hpp"

using namespace bertbench;

namespace {

void decode(std::string_view payload) {
    fuzz::expect_clean([&] {
        const io::Example e = io::decode_example(payload, "fuzz");
        // Re-encoding what was decoded and decoding again gives the same features.
        const io::Example again = io::decode_example(io::encode_example(e), "fuzz re-encoded");
        if (again.features.size() != e.features.size()) std::abort();
        for (size_t i = 0; i < e.features.size(); ++i)
            if (again.features[i].first != e.features[i].first ||
                again.features[i].second.size() != e.features[i].second.size())
                std::abort();
    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    const std::string& path = file.write(data, size);
    decode(std::string_view(reinterpret_cast<const char*>(data), size));
    for (bool skip : {false, true}) {
        fuzz::expect_clean([&] {
            io::TfRecordReader r(path, skip);
            std::string payload;
            uint64_t n = 0;
            while (r.next(payload)) {
                if (r.offset() > r.file_size()) std::abort();
                decode(payload);
                ++n;
            }
            // Work stays linear in the file size, whatever it claims (the resync is one pass).
            if (r.bytes_read() > 8 * size + 4096 || r.bytes_checksummed() > 16 * size + 4096)
                std::abort();
            if (n > size / 16) std::abort();
        });
    }
    return 0;
}
