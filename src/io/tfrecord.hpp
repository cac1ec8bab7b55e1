// TFRecord files: each record is u64le length, u32le masked CRC-32C of those 8 bytes, the
// payload, u32le masked CRC-32C of the payload. Reference: TensorFlow core/lib/io/record_writer.cc
// and record_reader.cc. Writers are atomic ("<path>.tmp.<pid>", renamed on close()); readers check
// both CRCs and report a bad record with file, record index and byte offset.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "core/fs.hpp"
#include "io/crc32c.hpp"

namespace bertbench::io {

class TfRecordWriter {
  public:
    explicit TfRecordWriter(const std::string& path);
    ~TfRecordWriter();  // without close(): the temporary file is removed, nothing is published
    TfRecordWriter(const TfRecordWriter&) = delete;
    TfRecordWriter& operator=(const TfRecordWriter&) = delete;

    void write(std::string_view payload);
    // The temporary for commit_together (core/fs.hpp: synced, then several files renamed as
    // one); the writer is closed after it
    std::unique_ptr<AtomicFile> stage();
    void close();  // flush + fsync + rename to the final path; idempotent
    uint64_t records() const { return records_; }
    uint64_t bytes() const { return bytes_; }  // bytes written so far (framing included)
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    std::unique_ptr<AtomicFile> file_;
    uint64_t records_ = 0, bytes_ = 0;
};

class TfRecordReader {
  public:
    // skip_corrupt: a record whose length or data CRC does not match is skipped and counted, the
    // first three skips of the file each in a warning line, and the total at its end if more
    // (after a bad length header the reader resynchronises on the next valid record: header CRC,
    // length within the file and data CRC all match; linear time whatever the file claims);
    // a truncated tail ends the file. Otherwise each of these throws Error. `say_skips` false:
    // the skips are only counted (a counting pass before the pass that says them).
    explicit TfRecordReader(const std::string& path, bool skip_corrupt = false, bool say_skips = true);
    ~TfRecordReader();
    TfRecordReader(const TfRecordReader&) = delete;
    TfRecordReader& operator=(const TfRecordReader&) = delete;

    // Reads the next record into `payload`. False at a clean end of file. A corrupt or
    // truncated record throws Error naming the file, record index, byte offset and the CRCs.
    bool next(std::string& payload);
    // Moves past the next record checking only its framing (the length's CRC, and that the record
    // and its data CRC lie within the file), without reading its data: the same errors as next()
    // for a truncated file or a bad length header. False at a clean end of file.
    bool skip();

    uint64_t index() const { return index_; }    // index of the record next() reads next
    uint64_t offset() const { return offset_; }  // byte offset of that record
    uint64_t corrupt_skipped() const { return corrupt_skipped_; }
    // Work done so far, for tests: bytes read from the file and bytes run through CRC-32C.
    // Both stay within a small multiple of the file size, even while resynchronising.
    uint64_t bytes_read() const { return bytes_read_; }
    uint64_t bytes_checksummed() const { return checksummed_; }
    uint64_t file_size() const { return size_; }
    const std::string& path() const { return path_; }
    // Positions the reader at a record boundary previously reported by offset()/index().
    void seek(uint64_t offset, uint64_t index);

  private:
    bool advance(std::string* payload);  // next(), or skip() for null
    bool read_at(uint64_t pos, void* dst, size_t n);     // false if the file ends before pos + n
    // With skip_corrupt: the next valid record at or after `from` (the first one to end), in one
    // linear pass (see tfrecord.cpp).
    bool resync(uint64_t from);
    // counts a corrupt record; warns for the first kSkipsNamed
    void note_skipped(const char* what);

    static constexpr uint64_t kSkipsNamed = 3;
    std::string path_;
    std::FILE* file_ = nullptr;
    uint64_t size_ = 0;
    uint64_t pos_ = 0;  // current position of file_ (avoids redundant fseek)
    uint64_t index_ = 0, offset_ = 0, corrupt_skipped_ = 0;
    uint64_t bytes_read_ = 0, checksummed_ = 0;
    bool skip_corrupt_ = false, say_skips_ = true, total_said_ = false;
};

// The CRC-32C register advanced over n zero bytes: crc32c(a ++ b) ==
// crc32c_shift(crc32c(a), b.size()) ^ crc32c(b) (zlib's crc32_combine). O(log n).
uint32_t crc32c_shift(uint32_t crc, uint64_t n);

// Number of records in a file (reads every record, checking CRCs). Corrupt records skipped
// (`skip_corrupt`) are not counted, and said only with `say_skips` (otherwise the pass that reads
// the records says them; one that may stop early leaves that to the count).
uint64_t count_tfrecords(const std::string& path, bool skip_corrupt = false, bool say_skips = false);

}  // namespace bertbench::io
