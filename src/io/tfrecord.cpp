// TFRecord reader and writer (framing: u64le length, masked CRC of it, payload, masked CRC).
// The reader uses stdio buffering and checks the length against the file size before allocating,
// so a corrupt length can never cause a huge allocation.
#include "io/tfrecord.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace bertbench::io {
namespace {

constexpr uint64_t kHeader = 12, kFooter = 4;

uint64_t load_u64le(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
uint32_t load_u32le(const unsigned char* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void store_u64le(unsigned char* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void store_u32le(unsigned char* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
TfRecordWriter::TfRecordWriter(const std::string& path)
    : path_(path), file_(std::make_unique<AtomicFile>(path)) {}

TfRecordWriter::~TfRecordWriter() = default;  // AtomicFile's destructor removes the temporary

void TfRecordWriter::write(std::string_view payload) {
    if (!file_) fail("[tfrecord] {}: write after close()", path_);
    unsigned char header[kHeader], footer[kFooter];
    store_u64le(header, payload.size());
    store_u32le(header + 8, masked_crc32c(header, 8));
    store_u32le(footer, masked_crc32c(payload.data(), payload.size()));
    file_->write(header, kHeader);
    file_->write(payload.data(), payload.size());
    file_->write(footer, kFooter);
    ++records_;
    bytes_ += kHeader + payload.size() + kFooter;
}

void TfRecordWriter::close() {
    if (!file_) return;
    file_->commit();
    file_.reset();
}

// ---------------------------------------------------------------------------------------------
TfRecordReader::TfRecordReader(const std::string& path, bool skip_corrupt)
    : path_(path), skip_corrupt_(skip_corrupt) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_)
        fail("[tfrecord] {}: cannot open for reading: {} (hint: check the path and --input_file)",
             path, std::strerror(errno));
    struct stat st {};
    if (fstat(fileno(file_), &st) != 0 || !S_ISREG(st.st_mode)) {
        std::fclose(file_);
        file_ = nullptr;
        fail("[tfrecord] {}: not a regular file", path);
    }
    size_ = static_cast<uint64_t>(st.st_size);
}

TfRecordReader::~TfRecordReader() {
    if (file_) std::fclose(file_);
}

bool TfRecordReader::read_at(uint64_t pos, void* dst, size_t n) {
    if (pos > size_ || n > size_ - pos) return false;
    if (pos != pos_) {
        if (std::fseek(file_, static_cast<long>(pos), SEEK_SET) != 0)
            fail("[tfrecord] {}: seek to byte {} failed: {}", path_, pos, std::strerror(errno));
        pos_ = pos;
    }
    if (n > 0 && std::fread(dst, 1, n, file_) != n)
        fail("[tfrecord] {}: read of {} bytes at byte {} failed: {}", path_, n, pos,
             std::ferror(file_) ? std::strerror(errno) : "unexpected end of file");
    pos_ += n;
    return true;
}

bool TfRecordReader::try_header_at(uint64_t pos, uint64_t& length) {
    unsigned char header[kHeader];
    if (!read_at(pos, header, kHeader)) return false;
    if (masked_crc32c(header, 8) != load_u32le(header + 8)) return false;
    length = load_u64le(header);
    const uint64_t avail = size_ - pos - kHeader;  // read_at succeeded, so pos + 12 <= size_
    return length <= avail && avail - length >= kFooter;
}

bool TfRecordReader::resync(uint64_t from) {
    // Scan byte by byte for a header whose CRC matches and whose payload CRC matches too.
    std::string payload;
    for (uint64_t pos = from; pos + kHeader + kFooter <= size_; ++pos) {
        uint64_t length = 0;
        if (!try_header_at(pos, length)) continue;
        payload.resize(length);
        unsigned char footer[kFooter];
        read_at(pos + kHeader, payload.data(), length);
        read_at(pos + kHeader + length, footer, kFooter);
        if (masked_crc32c(payload.data(), length) == load_u32le(footer)) {
            offset_ = pos;
            return true;
        }
    }
    offset_ = size_;
    return false;
}

bool TfRecordReader::next(std::string& payload) {
    const char* hint =
        "the file is corrupt or truncated (hint: --skip_corrupt_records to continue)";
    while (true) {
        if (offset_ == size_) return false;
        unsigned char header[kHeader];
        if (!read_at(offset_, header, kHeader)) {
            if (!skip_corrupt_)
                fail("[tfrecord] {}: record {} at byte {}: truncated header ({} of 12 bytes); {}",
                     path_, index_, offset_, size_ - offset_, hint);
            ++corrupt_skipped_;
            offset_ = size_;
            return false;
        }
        const uint32_t want_len_crc = load_u32le(header + 8);
        const uint32_t got_len_crc = masked_crc32c(header, 8);
        if (want_len_crc != got_len_crc) {
            if (!skip_corrupt_)
                fail(
                    "[tfrecord] {}: record {} at byte {}: length CRC mismatch (expected 0x{:08x}, "
                    "got 0x{:08x}); {}",
                    path_, index_, offset_, want_len_crc, got_len_crc, hint);
            ++corrupt_skipped_;
            ++index_;
            if (!resync(offset_ + 1)) return false;
            continue;
        }
        const uint64_t length = load_u64le(header);
        const uint64_t avail = size_ - offset_ - kHeader;
        if (length > avail || avail - length < kFooter) {
            if (!skip_corrupt_)
                fail(
                    "[tfrecord] {}: record {} at byte {}: truncated record (length {} + 4-byte "
                    "CRC, "
                    "only {} bytes left); {}",
                    path_, index_, offset_, length, avail, hint);
            ++corrupt_skipped_;
            ++index_;
            if (!resync(offset_ + 1)) return false;
            continue;
        }
        payload.resize(length);
        unsigned char footer[kFooter];
        read_at(offset_ + kHeader, payload.data(), length);
        read_at(offset_ + kHeader + length, footer, kFooter);
        const uint32_t want = load_u32le(footer);
        const uint32_t got = masked_crc32c(payload.data(), length);
        if (want != got) {
            if (!skip_corrupt_)
                fail(
                    "[tfrecord] {}: record {} at byte {}: data CRC mismatch (expected 0x{:08x}, "
                    "got 0x{:08x}); {}",
                    path_, index_, offset_, want, got, hint);
            ++corrupt_skipped_;
            ++index_;
            offset_ += kHeader + length + kFooter;
            continue;
        }
        offset_ += kHeader + length + kFooter;
        ++index_;
        return true;
    }
}

void TfRecordReader::seek(uint64_t offset, uint64_t index) {
    if (offset > size_)
        fail(
            "[tfrecord] {}: cannot seek to byte {}: the file has {} bytes (hint: the cursor "
            "belongs to a different or changed file)",
            path_, offset, size_);
    offset_ = offset;
    index_ = index;
}

uint64_t count_tfrecords(const std::string& path, bool skip_corrupt) {
    TfRecordReader reader(path, skip_corrupt);
    std::string payload;
    uint64_t n = 0;
    while (reader.next(payload)) ++n;
    return n;
}

}  // namespace bertbench::io
