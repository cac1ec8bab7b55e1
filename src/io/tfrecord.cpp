// TFRecord reader and writer (framing: u64le length, masked CRC of it, payload, masked CRC).
// The reader uses stdio buffering and checks the length against the file size before allocating,
// so a corrupt length can never cause a huge allocation. With skip_corrupt, resync() finds the next
// record in one linear pass (no claimed payload is read twice; see there).
#include "io/tfrecord.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <queue>
#include <vector>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/log.hpp"

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
// "7b 22 76 65 ... (\"{\"ve...\")": bytes in hex and as text, for what a file that is not one is
std::string first_bytes(const unsigned char* p, size_t n) {
    std::string hex, text;
    for (size_t i = 0; i < n; ++i) {
        hex += fmt::format("{}{:02x}", i ? " " : "", p[i]);
        text += p[i] >= 0x20 && p[i] < 0x7f ? static_cast<char>(p[i]) : '.';
    }
    return hex + " (\"" + text + "\")";
}

// a·b modulo the CRC-32C polynomial, in the reflected bit order CRCs are kept in
// (zlib's multmodp, crc32.c).
uint32_t multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ 0x82F63B78u : b >> 1;
    }
    return p;
}

}  // namespace

uint32_t crc32c_shift(uint32_t crc, uint64_t n) {
    // x^(8n) mod P as a product over the bytes of n: table[j][v] = x^(8·v·256^j) mod P
    // (8 x 256 entries, built once), so one shift costs at most 9 multiplications.
    using Tables = std::array<std::array<uint32_t, 256>, 8>;
    static const Tables table = [] {
        Tables t{};
        uint32_t step = 1u << 23;  // x^8, in the reflected order (x^0 is bit 31)
        for (auto& row : t) {
            row[0] = 1u << 31;  // x^0
            for (size_t v = 1; v < 256; ++v) row[v] = multmodp(row[v - 1], step);
            step = multmodp(row[255], step);  // x^(8·256^(j+1))
        }
        return t;
    }();
    for (size_t j = 0; n != 0; n >>= 8, ++j)
        if (n & 0xFF) crc = multmodp(table[j][n & 0xFF], crc);
    return crc;
}

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

std::unique_ptr<AtomicFile> TfRecordWriter::stage() {
    if (!file_) fail("[tfrecord] {}: stage after close()", path_);
    return std::move(file_);
}

void TfRecordWriter::close() {
    if (!file_) return;
    file_->commit();
    file_.reset();
}

// ---------------------------------------------------------------------------------------------
TfRecordReader::TfRecordReader(const std::string& path, bool skip_corrupt, bool say_skips)
    : path_(path), skip_corrupt_(skip_corrupt), say_skips_(say_skips) {
    // A FIFO, directory or device is an error before any read (opening a FIFO does not wait).
    std::string why;
    const int fd = open_regular_file(path, &why);
    if (fd < 0) {
        if (errno != 0)
            fail("[tfrecord] {}: cannot open for reading: {} (hint: check the path)", path,
                 std::strerror(errno));
        fail("[tfrecord] {}: {}", path, why);
    }
    file_ = ::fdopen(fd, "rb");
    if (!file_) {
        const int err = errno;
        ::close(fd);
        fail("[tfrecord] {}: cannot open for reading: {}", path, std::strerror(err));
    }
    struct stat st {};
    if (fstat(fileno(file_), &st) != 0) {
        std::fclose(file_);
        file_ = nullptr;
        fail("[tfrecord] {}: cannot stat: {}", path, std::strerror(errno));
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

bool TfRecordReader::resync(uint64_t from) {
    // One forward pass over [from, size_), in chunks. At every byte a 12-byte header is tried
    // (length CRC, length within the rest of the file). A plausible header does not read its
    // payload: it becomes a pending candidate, checked when the pass reaches the payload's end,
    // with the payload's CRC derived from the running CRC of the pass at its start and end
    // (crc(D) = C(end) ^ C(start)·x^(8·len)). The first candidate whose data CRC matches when
    // its payload ends wins (the earliest-starting one if several end together); candidates
    // still open then overlap it and are dropped. Work: each byte is read and checksummed a
    // bounded number of times, whatever the file claims.
    struct Candidate {
        uint64_t end;      // file offset of the payload's end (the data CRC follows)
        uint64_t start;    // file offset of the header
        uint32_t shifted;  // C(payload start) advanced over the payload's length
    };
    const auto later = [](const Candidate& a, const Candidate& b) {
        return a.end != b.end ? a.end > b.end : a.start > b.start;
    };
    std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> open(later);
    size_t chunk = 512;  // doubles up to 64 KiB: a record found early costs a short read
    constexpr size_t kMaxOpen = size_t{1} << 22;  // ~100 MB of candidates
    std::vector<unsigned char> buf;  // file bytes [base, base + buf.size())
    uint64_t base = from;
    uint32_t crc = 0;          // CRC-32C of the file bytes [from, crc_pos)
    uint64_t crc_pos = from;
    const auto crc_to = [&](uint64_t x) {  // advance the running CRC to x (bytes in buf)
        crc = crc32c(buf.data() + (crc_pos - base), x - crc_pos, crc);
        checksummed_ += x - crc_pos;
        crc_pos = x;
    };
    for (uint64_t x = from; x + kFooter <= size_; ++x) {
        if (x + kHeader > base + buf.size() && base + buf.size() < size_) {
            crc_to(x);  // bytes before x are about to leave the window
            buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(x - base));
            base = x;
            const size_t have = buf.size();
            const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, size_ - (base + have)));
            chunk = std::min<size_t>(2 * chunk, 1 << 16);
            buf.resize(have + n);
            read_at(base + have, buf.data() + have, n);
            bytes_read_ += n;
        }
        const unsigned char* here = buf.data() + (x - base);
        // Candidates whose payload ends at x: the data CRC sits at x (4 bytes, in the window).
        if (!open.empty() && open.top().end == x) {
            crc_to(x);
            const uint32_t want = load_u32le(here);
            while (!open.empty() && open.top().end == x) {
                const Candidate c = open.top();
                open.pop();
                if (mask_crc(crc ^ c.shifted) == want) {
                    offset_ = c.start;
                    return true;
                }
            }
        }
        if (x + kHeader + kFooter > size_) continue;
        checksummed_ += 8;
        if (masked_crc32c(here, 8) != load_u32le(here + 8)) continue;
        const uint64_t length = load_u64le(here);
        const uint64_t avail = size_ - x - kHeader;
        if (length > avail || avail - length < kFooter) continue;  // longer than the file
        crc_to(x);
        const uint32_t at_payload = crc32c(here, kHeader, crc);  // C(x + 12)
        checksummed_ += kHeader;
        open.push({x + kHeader + length, x, crc32c_shift(at_payload, length)});
        if (open.size() > kMaxOpen)
            fail(
                "[tfrecord] {}: resynchronising after byte {}: more than {} overlapping record "
                "headers with valid length CRCs (expected TFRecord data, got something crafted)",
                path_, from, kMaxOpen);
    }
    offset_ = size_;
    return false;
}

bool TfRecordReader::next(std::string& payload) { return advance(&payload); }

void TfRecordReader::note_skipped(const char* what) {
    ++corrupt_skipped_;
    if (say_skips_ && corrupt_skipped_ <= kSkipsNamed)
        log::warn(
            "[tfrecord] {}: record {} at byte {}: {}; skipped (--skip_corrupt_records){}", path_,
            index_, offset_, what,
            corrupt_skipped_ == kSkipsNamed ? "; further skips in this file are only counted" : "");
}
bool TfRecordReader::skip() { return advance(nullptr); }

bool TfRecordReader::advance(std::string* payload) {
    const char* hint =
        "the file is corrupt or truncated (hint: --skip_corrupt_records to continue)";
    while (true) {
        if (offset_ == size_) {
            if (say_skips_ && corrupt_skipped_ > kSkipsNamed && !total_said_) {
                total_said_ = true;
                log::warn(
                    "[tfrecord] {}: skipped {} corrupt records in all (--skip_corrupt_records)",
                    path_, corrupt_skipped_);
            }
            return false;
        }
        unsigned char header[kHeader];
        if (!read_at(offset_, header, kHeader)) {
            if (!skip_corrupt_)
                fail("[tfrecord] {}: record {} at byte {}: truncated header ({} of 12 bytes); {}",
                     path_, index_, offset_, size_ - offset_, hint);
            note_skipped("truncated header");
            offset_ = size_;
            return false;
        }
        bytes_read_ += kHeader;
        checksummed_ += 8;
        const uint32_t want_len_crc = load_u32le(header + 8);
        const uint32_t got_len_crc = masked_crc32c(header, 8);
        if (want_len_crc != got_len_crc) {
            if (!skip_corrupt_ && offset_ == 0)  // its first header: likely no TFRecord file at all
                fail(
                    "[tfrecord] {}: not a TFRecord file (the first record's length CRC does not "
                    "match; the file starts with {}); expected TFRecords of tf.train.Example",
                    path_, first_bytes(header, kHeader));
            if (!skip_corrupt_)
                fail(
                    "[tfrecord] {}: record {} at byte {}: length CRC mismatch (expected 0x{:08x}, "
                    "got 0x{:08x}); {}",
                    path_, index_, offset_, want_len_crc, got_len_crc, hint);
            note_skipped("length CRC mismatch");
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
            note_skipped("truncated record");
            ++index_;
            if (!resync(offset_ + 1)) return false;
            continue;
        }
        if (payload == nullptr) {  // skip(): the framing only
            offset_ += kHeader + length + kFooter;
            ++index_;
            return true;
        }
        payload->resize(length);
        unsigned char footer[kFooter];
        read_at(offset_ + kHeader, payload->data(), length);
        read_at(offset_ + kHeader + length, footer, kFooter);
        bytes_read_ += length + kFooter;
        checksummed_ += length;
        const uint32_t want = load_u32le(footer);
        const uint32_t got = masked_crc32c(payload->data(), length);
        if (want != got) {
            if (!skip_corrupt_)
                fail(
                    "[tfrecord] {}: record {} at byte {}: data CRC mismatch (expected 0x{:08x}, "
                    "got 0x{:08x}); {}",
                    path_, index_, offset_, want, got, hint);
            note_skipped("data CRC mismatch");
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

uint64_t count_tfrecords(const std::string& path, bool skip_corrupt, bool say_skips) {
    TfRecordReader reader(path, skip_corrupt, say_skips);
    std::string payload;
    uint64_t n = 0;
    while (reader.next(payload)) ++n;
    return n;
}

}  // namespace bertbench::io
