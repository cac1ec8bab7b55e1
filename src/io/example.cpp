// tf.train.Example protobuf codec (proto3 wire format, written by hand; see example.hpp).
// The encoder computes every nested length first and writes in one pass; the decoder is a
// bounds-checked cursor that never reads past its input and throws Error on malformed bytes.
#include "io/example.hpp"

#include <cstring>
#include <unordered_map>

#include "core/error.hpp"
#include "io/wire.hpp"

namespace bertbench::io {
namespace {

// Field tags (field_number << 3 | wire_type).
constexpr uint8_t kTagLen1 = 0x0A;  // field 1, length-delimited
constexpr uint8_t kTagLen2 = 0x12;  // field 2, length-delimited
constexpr uint8_t kTagLen3 = 0x1A;  // field 3, length-delimited

using wire::put_varint;
using wire::varint_size;

// Size of the list message (Int64List / FloatList / BytesList) of a feature.
size_t list_size(const Feature& f) {
    switch (f.kind) {
        case Feature::Kind::int64: {
            if (f.ints.empty()) return 0;  // an empty packed field is not written
            size_t payload = 0;
            for (int64_t v : f.ints) payload += varint_size(static_cast<uint64_t>(v));
            return 1 + varint_size(payload) + payload;
        }
        case Feature::Kind::float32: {
            if (f.floats.empty()) return 0;
            size_t payload = 4 * f.floats.size();
            return 1 + varint_size(payload) + payload;
        }
        case Feature::Kind::bytes: {
            size_t n = 0;
            for (const auto& s : f.bytes) n += 1 + varint_size(s.size()) + s.size();
            return n;
        }
    }
    return 0;
}

void put_list(std::string& out, const Feature& f) {
    switch (f.kind) {
        case Feature::Kind::int64: {
            if (f.ints.empty()) return;
            size_t payload = 0;
            for (int64_t v : f.ints) payload += varint_size(static_cast<uint64_t>(v));
            out.push_back(static_cast<char>(kTagLen1));
            put_varint(out, payload);
            for (int64_t v : f.ints) put_varint(out, static_cast<uint64_t>(v));
            return;
        }
        case Feature::Kind::float32: {
            if (f.floats.empty()) return;
            out.push_back(static_cast<char>(kTagLen1));
            put_varint(out, 4 * f.floats.size());
            for (float v : f.floats) {
                uint32_t u;
                std::memcpy(&u, &v, 4);
                char b[4] = {static_cast<char>(u), static_cast<char>(u >> 8),
                             static_cast<char>(u >> 16), static_cast<char>(u >> 24)};
                out.append(b, 4);
            }
            return;
        }
        case Feature::Kind::bytes:
            for (const auto& s : f.bytes) {
                out.push_back(static_cast<char>(kTagLen1));
                put_varint(out, s.size());
                out.append(s);
            }
            return;
    }
}

uint8_t kind_tag(Feature::Kind k) {
    switch (k) {
        case Feature::Kind::bytes:
            return kTagLen1;
        case Feature::Kind::float32:
            return kTagLen2;
        case Feature::Kind::int64:
            return kTagLen3;
    }
    return kTagLen3;
}

// ----------------------------------------------------------------------------------- decoding
class Cursor {
  public:
    Cursor(const uint8_t* begin, const uint8_t* end, const uint8_t* origin, std::string_view where)
        : p_(begin), end_(end), origin_(origin), where_(where) {}

    bool done() const { return p_ >= end_; }

    [[noreturn]] void error(std::string_view what) const {
        fail(
            "[example] {}: malformed tf.train.Example: {} at byte {} (hint: the record is not a "
            "tf.train.Example or is corrupt)",
            where_, what, p_ - origin_);
    }

    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (p_ >= end_) error("truncated varint");
            const uint8_t b = *p_++;
            if (shift < 64) v |= static_cast<uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        error("varint longer than 10 bytes");
    }

    Cursor sub() {  // a length-delimited field's contents; advances past it
        const uint64_t n = varint();
        if (n > static_cast<uint64_t>(end_ - p_)) error("length past the end of its message");
        Cursor c(p_, p_ + n, origin_, where_);
        p_ += n;
        return c;
    }

    uint32_t fixed32() {
        if (end_ - p_ < 4) error("truncated fixed32");
        uint32_t v =
            uint32_t(p_[0]) | uint32_t(p_[1]) << 8 | uint32_t(p_[2]) << 16 | uint32_t(p_[3]) << 24;
        p_ += 4;
        return v;
    }

    void skip(uint32_t wire_type) {
        switch (wire_type) {
            case 0:
                varint();
                return;
            case 1:
                if (end_ - p_ < 8) error("truncated fixed64");
                p_ += 8;
                return;
            case 2:
                sub();
                return;
            case 5:
                fixed32();
                return;
            default:
                error(fmt::format("unsupported wire type {}", wire_type));
        }
    }

    std::string_view bytes() const {
        return {reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_)};
    }

  private:
    const uint8_t* p_;
    const uint8_t* end_;
    const uint8_t* origin_;
    std::string_view where_;
};

struct Tag {
    uint64_t field;
    uint32_t wire;
};
Tag read_tag(Cursor& c) {
    const uint64_t t = c.varint();
    if ((t >> 3) == 0) c.error("field number 0");
    return {t >> 3, static_cast<uint32_t>(t & 7)};
}

void decode_int64_list(Cursor c, std::vector<int64_t>& out) {
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (t.field == 1 && t.wire == 2) {
            Cursor packed = c.sub();
            while (!packed.done()) out.push_back(static_cast<int64_t>(packed.varint()));
        } else if (t.field == 1 && t.wire == 0) {
            out.push_back(static_cast<int64_t>(c.varint()));
        } else {
            c.skip(t.wire);
        }
    }
}

float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

void decode_float_list(Cursor c, std::vector<float>& out) {
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (t.field == 1 && t.wire == 2) {
            Cursor packed = c.sub();
            if (packed.bytes().size() % 4 != 0)
                packed.error("packed float list not a multiple of 4");
            while (!packed.done()) out.push_back(bits_to_float(packed.fixed32()));
        } else if (t.field == 1 && t.wire == 5) {
            out.push_back(bits_to_float(c.fixed32()));
        } else {
            c.skip(t.wire);
        }
    }
}

void decode_bytes_list(Cursor c, std::vector<std::string>& out) {
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (t.field == 1 && t.wire == 2) {
            out.emplace_back(c.sub().bytes());
        } else {
            c.skip(t.wire);
        }
    }
}

// Merges a Feature message into `f` (protobuf semantics: a oneof member seen again merges;
// a different member replaces). `set` says whether `f` already holds a member.
void decode_feature(Cursor c, Feature& f, bool& set) {
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (t.wire != 2 || t.field < 1 || t.field > 3) {
            c.skip(t.wire);
            continue;
        }
        const Feature::Kind kind = t.field == 1   ? Feature::Kind::bytes
                                   : t.field == 2 ? Feature::Kind::float32
                                                  : Feature::Kind::int64;
        if (!set || f.kind != kind) {
            f = Feature{};
            f.kind = kind;
            set = true;
        }
        Cursor list = c.sub();
        switch (kind) {
            case Feature::Kind::bytes:
                decode_bytes_list(list, f.bytes);
                break;
            case Feature::Kind::float32:
                decode_float_list(list, f.floats);
                break;
            case Feature::Kind::int64:
                decode_int64_list(list, f.ints);
                break;
        }
    }
}

void decode_features(Cursor c, Example& e, std::unordered_map<std::string, size_t>& index) {
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (!(t.field == 1 && t.wire == 2)) {
            c.skip(t.wire);
            continue;
        }
        Cursor entry = c.sub();
        std::string key;
        Feature value;
        bool value_set = false;
        while (!entry.done()) {
            const Tag et = read_tag(entry);
            if (et.field == 1 && et.wire == 2) {
                key = std::string(entry.sub().bytes());
            } else if (et.field == 2 && et.wire == 2) {
                decode_feature(entry.sub(), value, value_set);
            } else {
                entry.skip(et.wire);
            }
        }
        auto [it, inserted] = index.emplace(key, e.features.size());
        if (inserted) {
            e.features.emplace_back(std::move(key), std::move(value));
        } else {
            e.features[it->second].second = std::move(value);  // map semantics: last one wins
        }
    }
}

}  // namespace

size_t Feature::size() const {
    switch (kind) {
        case Kind::int64:
            return ints.size();
        case Kind::float32:
            return floats.size();
        case Kind::bytes:
            return bytes.size();
    }
    return 0;
}

const Feature* Example::find(std::string_view name) const {
    for (const auto& [k, f] : features)
        if (k == name) return &f;
    return nullptr;
}

void Example::add_int64(std::string name, std::span<const int64_t> v) {
    Feature f;
    f.kind = Feature::Kind::int64;
    f.ints.assign(v.begin(), v.end());
    features.emplace_back(std::move(name), std::move(f));
}

void Example::add_int64(std::string name, std::span<const int32_t> v) {
    Feature f;
    f.kind = Feature::Kind::int64;
    f.ints.assign(v.begin(), v.end());
    features.emplace_back(std::move(name), std::move(f));
}

void Example::add_float(std::string name, std::span<const float> v) {
    Feature f;
    f.kind = Feature::Kind::float32;
    f.floats.assign(v.begin(), v.end());
    features.emplace_back(std::move(name), std::move(f));
}

void Example::add_bytes(std::string name, std::span<const std::string> v) {
    Feature f;
    f.kind = Feature::Kind::bytes;
    f.bytes.assign(v.begin(), v.end());
    features.emplace_back(std::move(name), std::move(f));
}

void encode_example(const Example& e, std::string& out) {
    // Sizes: entry = [key field if non-empty] + value field; features = sum of entry fields.
    size_t features_size = 0;
    std::vector<size_t> sizes;  // per feature: list size, feature size, entry size
    sizes.reserve(3 * e.features.size());
    for (const auto& [key, f] : e.features) {
        const size_t ls = list_size(f);
        const size_t fs = 1 + varint_size(ls) + ls;
        const size_t es =
            (key.empty() ? 0 : 1 + varint_size(key.size()) + key.size()) + 1 + varint_size(fs) + fs;
        sizes.insert(sizes.end(), {ls, fs, es});
        features_size += 1 + varint_size(es) + es;
    }
    out.reserve(out.size() + 1 + varint_size(features_size) + features_size);
    out.push_back(static_cast<char>(kTagLen1));
    put_varint(out, features_size);
    for (size_t i = 0; i < e.features.size(); ++i) {
        const auto& [key, f] = e.features[i];
        out.push_back(static_cast<char>(kTagLen1));
        put_varint(out, sizes[3 * i + 2]);
        if (!key.empty()) {  // proto3: a default (empty) key is not written
            out.push_back(static_cast<char>(kTagLen1));
            put_varint(out, key.size());
            out.append(key);
        }
        out.push_back(static_cast<char>(kTagLen2));
        put_varint(out, sizes[3 * i + 1]);
        out.push_back(static_cast<char>(kind_tag(f.kind)));
        put_varint(out, sizes[3 * i]);
        put_list(out, f);
    }
}

std::string encode_example(const Example& e) {
    std::string out;
    encode_example(e, out);
    return out;
}

Example decode_example(std::string_view bytes, std::string_view where) {
    const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
    Cursor c(begin, begin + bytes.size(), begin, where);
    Example e;
    std::unordered_map<std::string, size_t> index;
    while (!c.done()) {
        const Tag t = read_tag(c);
        if (t.field == 1 && t.wire == 2) {
            decode_features(c.sub(), e, index);
        } else {
            c.skip(t.wire);
        }
    }
    return e;
}

namespace {

const char* kind_name(Feature::Kind k) {
    switch (k) {
        case Feature::Kind::int64:
            return "int64_list";
        case Feature::Kind::float32:
            return "float_list";
        case Feature::Kind::bytes:
            return "bytes_list";
    }
    return "?";
}

const Feature& require(const Example& e, const char* name, Feature::Kind kind, size_t length,
                       std::string_view where) {
    const Feature* f = e.find(name);
    if (!f)
        fail(
            "{}: feature {}: expected a {} of {} values, got no such feature (hint: the file "
            "is not MLPerf BERT pretraining data)",
            where, name, kind_name(kind), length);
    if (f->kind != kind)
        fail("{}: feature {}: expected a {}, got a {}", where, name, kind_name(kind),
             kind_name(f->kind));
    if (f->size() != length)
        fail(
            "{}: feature {}: expected {} values, got {} (hint: check --max_seq_length / "
            "--max_predictions_per_seq against the data)",
            where, name, length, f->size());
    return *f;
}

}  // namespace

void parse_pretraining_example(const Example& e, int max_seq_length, int max_predictions_per_seq,
                               std::string_view where, PretrainingRecord& out) {
    using K = Feature::Kind;
    const size_t T = static_cast<size_t>(max_seq_length);
    const size_t P = static_cast<size_t>(max_predictions_per_seq);
    out.input_ids = require(e, "input_ids", K::int64, T, where).ints;
    out.input_mask = require(e, "input_mask", K::int64, T, where).ints;
    out.segment_ids = require(e, "segment_ids", K::int64, T, where).ints;
    out.masked_lm_positions = require(e, "masked_lm_positions", K::int64, P, where).ints;
    out.masked_lm_ids = require(e, "masked_lm_ids", K::int64, P, where).ints;
    out.masked_lm_weights = require(e, "masked_lm_weights", K::float32, P, where).floats;
    out.next_sentence_labels = require(e, "next_sentence_labels", K::int64, 1, where).ints[0];
}

Example pretraining_example(const PretrainingRecord& r) {
    Example e;
    e.features.reserve(7);
    e.add_int64("input_ids", r.input_ids);
    e.add_int64("input_mask", r.input_mask);
    e.add_int64("segment_ids", r.segment_ids);
    e.add_int64("masked_lm_positions", r.masked_lm_positions);
    e.add_int64("masked_lm_ids", r.masked_lm_ids);
    e.add_float("masked_lm_weights", r.masked_lm_weights);
    const int64_t nsl[1] = {r.next_sentence_labels};
    e.add_int64("next_sentence_labels", nsl);
    return e;
}

}  // namespace bertbench::io
