// The restricted unpickler and the small pickler of pickle.hpp. Nothing read from a pickle is ever
// looked up or called: allowed globals are names the VM knows how to build data from, the rest
// become inert `refused` values, and every length is checked against the bytes left before a
// string is made (so memory stays linear in the input).
#include "io/pickle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/error.hpp"
#include "core/json_safe.hpp"

namespace bertbench::io::pickle {
namespace {

struct StorageType {
    const char* name;
    DType dtype;
};
constexpr StorageType kStorages[] = {
    {"torch.FloatStorage", DType::F32},  {"torch.HalfStorage", DType::F16},
    {"torch.BFloat16Storage", DType::BF16}, {"torch.DoubleStorage", DType::F64},
    {"torch.LongStorage", DType::I64},   {"torch.IntStorage", DType::I32},
    {"torch.ShortStorage", DType::I16},  {"torch.CharStorage", DType::I8},
    {"torch.ByteStorage", DType::U8},    {"torch.BoolStorage", DType::BOOL},
};
constexpr const char* kCallables[] = {
    "collections.OrderedDict",        "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor",   "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
};

Value make(Kind k, int64_t i = 0) {
    Value v;
    v.kind = k;
    v.i = i;
    return v;
}
Value make_str(Kind k, std::string s) {
    Value v;
    v.kind = k;
    v.s = std::move(s);
    return v;
}
Value make_seq(Kind k, std::vector<uint32_t> items) {
    Value v;
    v.kind = k;
    v.items = std::move(items);
    return v;
}

std::string printable(std::string_view s, size_t max = 60) {
    std::string out;
    for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    if (s.size() > max) out += "...";
    return out;
}

}  // namespace

const char* kind_name(Kind k) {
    static const char* const kNames[] = {"None",   "a bool",    "an int",    "an int",
                                         "a float", "a str",    "bytes",     "a tuple",
                                         "a list",  "a dict",   "a global",  "a storage",
                                         "a tensor", "an object"};
    return kNames[static_cast<int>(k)];
}

bool storage_dtype(std::string_view global, DType* out) {
    for (const StorageType& s : kStorages)
        if (global == s.name) {
            *out = s.dtype;
            return true;
        }
    return false;
}

bool allowed_global(std::string_view name) {
    DType d;
    return storage_dtype(name, &d) ||
           std::find(std::begin(kCallables), std::end(kCallables), name) != std::end(kCallables);
}

// ---- unpickler ----

std::string Unpickler::utf8(std::string s) const {
    if (const size_t at = json_safe::invalid_utf8_at(s); at != std::string::npos)
        bad(fmt::format("a str that is not UTF-8 (byte 0x{:02x} at offset {} of '{}'; Python's pickle fails "
                        "on it too)", static_cast<unsigned char>(s[at]), at, printable(s)));
    return s;
}

void Unpickler::bad(const std::string& what) const {
    fail("{}: pickle byte {}: {}", label_, at_, what);
}

uint32_t Unpickler::add(Value v) {
    values_.push_back(std::move(v));
    return static_cast<uint32_t>(values_.size() - 1);
}

uint32_t Unpickler::pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("stack underflow");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
}

std::vector<uint32_t> Unpickler::pop_mark() {
    if (marks_.empty()) bad("expected a MARK on the stack, found none");
    std::vector<uint32_t> items(stack_.begin() + static_cast<ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
}

const Value* Unpickler::get(const Value& d, std::string_view key) const {
    if (d.kind != Kind::dict) return nullptr;
    for (size_t k = 0; k + 1 < d.items.size(); k += 2) {
        const Value& kv = values_[d.items[k]];
        if (kv.kind == Kind::string && kv.s == key) return &values_[d.items[k + 1]];
    }
    return nullptr;
}

std::string Unpickler::brief(const Value& v) const {
    switch (v.kind) {
        case Kind::integer:
            return fmt::format("an int {}", v.i);
        case Kind::string:
            return fmt::format("a str '{}'", printable(v.s));
        case Kind::tuple:
        case Kind::list:
            return fmt::format("{} of {}", kind_name(v.kind), v.items.size());
        case Kind::dict:
            return fmt::format("a dict of {}", v.items.size() / 2);
        case Kind::global:
            return fmt::format("the global {}", v.s);
        case Kind::refused:
            return fmt::format("an object built by the global {}", v.s);
        default:
            return kind_name(v.kind);
    }
}

uint32_t Unpickler::persistent(uint32_t pid) {
    const Value& t = values_[pid];
    auto item = [&](size_t k) -> const Value& { return values_[t.items[k]]; };
    if (t.kind != Kind::tuple || t.items.size() < 5 || t.items.size() > 6 ||
        item(0).kind != Kind::string || item(0).s != "storage")
        bad(fmt::format("persistent id: expected ('storage', type, key, location, numel), got {}",
                        brief(t)));
    Value s;
    s.kind = Kind::storage;
    const Value& type = item(1);
    if ((type.kind != Kind::global && type.kind != Kind::refused) || !storage_dtype(type.s, &s.dtype))
        bad(fmt::format("persistent id: expected a storage type (torch.FloatStorage, "
                        "torch.HalfStorage, ...), got {}", brief(type)));
    if (item(2).kind != Kind::string || item(3).kind != Kind::string || item(4).kind != Kind::integer ||
        item(4).i < 0)
        bad("persistent id: expected a str key, a str location and a numel >= 0");
    s.s = item(2).s;
    s.location = item(3).s;
    s.i = item(4).i;
    if (t.items.size() == 6 && item(5).kind != Kind::none) {  // legacy view: (key, offset, size)
        const Value& v = item(5);
        if (v.kind != Kind::tuple || v.items.size() != 3 ||
            values_[v.items[1]].kind != Kind::integer || values_[v.items[2]].kind != Kind::integer ||
            values_[v.items[1]].i < 0 || values_[v.items[2]].i < 0)
            bad("persistent id: expected view metadata (key, offset >= 0, size >= 0) or None");
        s.view_offset = values_[v.items[1]].i;
        s.view_numel = values_[v.items[2]].i;
    }
    return add(std::move(s));
}

uint32_t Unpickler::call(uint32_t callable, uint32_t args) {
    const Value c = values_[callable];  // copies: add() below may move the arena
    if (c.kind == Kind::refused) return add(make_str(Kind::refused, c.s));
    if (c.kind != Kind::global) bad(fmt::format("REDUCE: expected a callable global, got {}", brief(c)));
    const Value a = values_[args];
    if (a.kind != Kind::tuple) bad(fmt::format("REDUCE {}: expected an argument tuple, got {}", c.s, brief(a)));
    auto arg = [&](size_t k) -> const Value& { return values_[a.items[k]]; };
    const size_t n = a.items.size();
    if (c.s == "collections.OrderedDict") {  // protocol 2: OrderedDict(), then SETITEMS
        // (A list-of-pairs argument is refused: memo references would let a few bytes copy it
        // over and over.)
        if (n != 0) bad(fmt::format("OrderedDict: expected no arguments, got {}", n));
        return add(make(Kind::dict));
    }
    if (c.s == "torch._utils._rebuild_tensor_v2" || c.s == "torch._utils._rebuild_tensor") {
        const bool v1 = c.s.back() == 'r';
        if (v1 ? n != 4 : (n < 6 || n > 7))
            bad(fmt::format("{}: expected {} arguments, got {}", c.s, v1 ? "4" : "6 or 7", n));
        if (arg(0).kind != Kind::storage)
            bad(fmt::format("{}: expected a storage, got {}", c.s, brief(arg(0))));
        if (arg(1).kind != Kind::integer || arg(1).i < 0)
            bad(fmt::format("{}: expected a storage offset >= 0, got {}", c.s, brief(arg(1))));
        Value t = make(Kind::tensor, arg(1).i);
        t.items = {a.items[0]};
        for (int which = 0; which < 2; ++which) {
            const Value& dims = arg(2 + which);
            if (dims.kind != Kind::tuple || dims.items.size() > 64)
                bad(fmt::format("{}: expected a {} tuple of at most 64 ints, got {}", c.s,
                                which ? "stride" : "size", brief(dims)));
            for (uint32_t d : dims.items) {
                if (values_[d].kind != Kind::integer || values_[d].i < 0)
                    bad(fmt::format("{}: expected {} entries >= 0", c.s, which ? "stride" : "size"));
                (which ? t.stride : t.shape).push_back(values_[d].i);
            }
        }
        if (t.shape.size() != t.stride.size())
            bad(fmt::format("{}: size has {} dims, stride {}", c.s, t.shape.size(), t.stride.size()));
        return add(std::move(t));
    }
    if (c.s == "torch._utils._rebuild_parameter" || c.s == "torch._utils._rebuild_parameter_with_state") {
        if (n < 3 || n > 4 || arg(0).kind != Kind::tensor)
            bad(fmt::format("{}: expected (tensor, requires_grad, hooks[, state])", c.s));
        return a.items[0];
    }
    bad(fmt::format("{} called: expected only as a storage type inside a persistent id", c.s));
}

Unpickler::Unpickler(std::span<const std::byte> data, size_t* pos, std::string label)
    : label_(std::move(label)) {
    const size_t size = data.size();
    size_t p = *pos;
    auto need = [&](size_t n) {
        if (n > size - p) bad(fmt::format("truncated: {} bytes needed, {} left", n, size - p));
    };
    auto u8 = [&]() { need(1); return static_cast<uint8_t>(data[p++]); };
    auto le = [&](int n) {
        need(size_t(n));
        uint64_t v = 0;
        for (int k = 0; k < n; ++k) v |= uint64_t(static_cast<uint8_t>(data[p + k])) << (8 * k);
        p += size_t(n);
        return v;
    };
    auto bytes = [&](uint64_t n) {
        need(n > size ? size + 1 : size_t(n));
        std::string s(reinterpret_cast<const char*>(data.data() + p), size_t(n));
        p += size_t(n);
        return s;
    };
    auto line = [&]() {
        const std::byte* b = data.data() + p;
        const void* nl = std::memchr(b, '\n', size - p);
        if (nl == nullptr) bad("truncated: expected a line ending in '\\n'");
        const size_t n = static_cast<size_t>(static_cast<const std::byte*>(nl) - b);
        std::string s(reinterpret_cast<const char*>(b), n);
        p += n + 1;
        return s;
    };
    auto push = [&](Value v) { stack_.push_back(add(std::move(v))); };
    auto integer = [&](uint64_t n) {  // LONG1/LONG4: n bytes, little-endian two's complement
        if (n > 8) {
            push(make_str(Kind::big_integer, bytes(n)));
            return;
        }
        need(size_t(n));
        const uint64_t v = n ? le(int(n)) : 0;
        const uint64_t sign = n ? uint64_t(1) << (8 * n - 1) : 0;
        const int64_t x = (n == 8 || !(v & sign)) ? int64_t(v) : int64_t(v | ~((sign << 1) - 1));
        push(make(Kind::integer, x));
    };
    auto top = [&](const char* op) -> Value& {
        if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad(fmt::format("{}: stack underflow", op));
        return values_[stack_.back()];
    };
    auto memo_get = [&](uint64_t k) {
        const auto it = memo_.find(uint32_t(k));
        if (k > UINT32_MAX || it == memo_.end()) bad(fmt::format("memo key {} was never stored", k));
        stack_.push_back(it->second);
    };
    auto memo_put = [&](uint64_t k) {
        if (k > UINT32_MAX) bad("memo key above 2^32");
        top("PUT");
        memo_[uint32_t(k)] = stack_.back();
    };
    auto into_container = [&](const char* op, std::vector<uint32_t> items, bool pairs) {
        Value& c = top(op);
        if (c.kind == Kind::refused) return;  // an object's own state: never applied
        const Kind want = pairs ? Kind::dict : Kind::list;
        if (c.kind != want) bad(fmt::format("{}: expected {} below, got {}", op, kind_name(want), brief(c)));
        if (pairs && items.size() % 2) bad(fmt::format("{}: odd number of items", op));
        c.items.insert(c.items.end(), items.begin(), items.end());
    };
    for (;;) {
        at_ = p;
        const uint8_t op = u8();
        switch (op) {
            case 0x80: {  // PROTO
                const uint8_t v = u8();
                if (v > 5) bad(fmt::format("pickle protocol {}: expected 2..5", v));
                break;
            }
            case 0x95: le(8); break;  // FRAME: a hint only
            case '.': {               // STOP
                root_ = pop();
                *pos = p;
                return;
            }
            case '(': marks_.push_back(stack_.size()); break;
            case '0': pop(); break;
            case '1': pop_mark(); break;
            case '2':
                top("DUP");
                stack_.push_back(stack_.back());
                break;
            case 'N': push(make(Kind::none)); break;
            case 0x88: push(make(Kind::boolean, 1)); break;
            case 0x89: push(make(Kind::boolean, 0)); break;
            case 'J': push(make(Kind::integer, int32_t(uint32_t(le(4))))); break;
            case 'K': push(make(Kind::integer, u8())); break;
            case 'M': push(make(Kind::integer, int64_t(le(2)))); break;
            case 0x8a: integer(u8()); break;
            case 0x8b: {
                const int64_t n = int32_t(uint32_t(le(4)));
                if (n < 0) bad("LONG4: negative length");
                integer(uint64_t(n));
                break;
            }
            case 'G': {  // BINFLOAT: big-endian double
                need(8);
                uint64_t v = 0;
                for (int k = 0; k < 8; ++k) v = v << 8 | static_cast<uint8_t>(data[p + k]);
                p += 8;
                double d;
                std::memcpy(&d, &v, 8);
                Value fv = make(Kind::floating);
                fv.f = d;
                push(std::move(fv));
                break;
            }
            // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8: Python decodes them as UTF-8 and fails
            // on anything else (no state dict of torch.load has such a name)
            case 'X': push(make_str(Kind::string, utf8(bytes(le(4))))); break;
            case 0x8c: push(make_str(Kind::string, utf8(bytes(u8())))); break;
            case 0x8d: push(make_str(Kind::string, utf8(bytes(le(8))))); break;
            case 'U': push(make_str(Kind::string, bytes(u8()))); break;  // py2 str
            case 'T': {
                const int64_t n = int32_t(uint32_t(le(4)));
                if (n < 0) bad("BINSTRING: negative length");
                push(make_str(Kind::string, bytes(uint64_t(n))));
                break;
            }
            case 'C': push(make_str(Kind::bytes, bytes(u8()))); break;
            case 'B': push(make_str(Kind::bytes, bytes(le(4)))); break;
            case 0x8e:
            case 0x96: push(make_str(Kind::bytes, bytes(le(8)))); break;
            case ')': push(make(Kind::tuple)); break;
            case 't': push(make_seq(Kind::tuple, pop_mark())); break;
            case 0x85:
            case 0x86:
            case 0x87: {
                std::vector<uint32_t> items(op - 0x84);
                for (size_t k = items.size(); k-- > 0;) items[k] = pop();
                push(make_seq(Kind::tuple, std::move(items)));
                break;
            }
            case ']': push(make(Kind::list)); break;
            case 'l': push(make_seq(Kind::list, pop_mark())); break;
            case 0x8f: push(make(Kind::list)); break;  // EMPTY_SET: kept as a list
            case 0x91: push(make_seq(Kind::list, pop_mark())); break;  // FROZENSET
            case 'a': {
                const uint32_t v = pop();
                into_container("APPEND", {v}, false);
                break;
            }
            case 'e':
            case 0x90: into_container(op == 'e' ? "APPENDS" : "ADDITEMS", pop_mark(), false); break;
            case '}': push(make(Kind::dict)); break;
            case 'd': {
                std::vector<uint32_t> items = pop_mark();
                if (items.size() % 2) bad("DICT: odd number of items");
                push(make_seq(Kind::dict, std::move(items)));
                break;
            }
            case 's': {
                const uint32_t v = pop(), k = pop();
                into_container("SETITEM", {k, v}, true);
                break;
            }
            case 'u': into_container("SETITEMS", pop_mark(), true); break;
            case 'h': memo_get(u8()); break;
            case 'j': memo_get(le(4)); break;
            case 'q': memo_put(u8()); break;
            case 'r': memo_put(le(4)); break;
            case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
            case 'c':
            case 0x93: {  // GLOBAL, STACK_GLOBAL: never resolved, only named
                std::string module, name;
                if (op == 'c') {
                    module = line();
                    name = line();
                } else {
                    const Value n = values_[pop()], m = values_[pop()];
                    if (n.kind != Kind::string || m.kind != Kind::string)
                        bad("STACK_GLOBAL: expected two strs");
                    module = m.s;
                    name = n.s;
                }
                std::string full = printable(module, 200);
                full += '.';
                full += printable(name, 200);
                const Kind k = allowed_global(full) ? Kind::global : Kind::refused;
                push(make_str(k, std::move(full)));
                break;
            }
            case 'i': {  // INST module\nname\n: an instance of a class; refused like its global
                std::string full = printable(line(), 200);
                full += '.';
                full += printable(line(), 200);
                pop_mark();
                push(make_str(Kind::refused, std::move(full)));
                break;
            }
            case 'o': {  // OBJ: mark, class, args
                const std::vector<uint32_t> items = pop_mark();
                if (items.empty()) bad("OBJ: expected a class");
                const Value& cls = values_[items[0]];
                push(make_str(Kind::refused,
                              cls.kind == Kind::global || cls.kind == Kind::refused ? cls.s : "?"));
                break;
            }
            case 'R': {
                const uint32_t args = pop(), callable = pop();
                stack_.push_back(call(callable, args));
                break;
            }
            case 0x81:
            case 0x92: {  // NEWOBJ, NEWOBJ_EX: cls.__new__(cls, *args): an object, refused
                if (op == 0x92) pop();
                pop();
                const Value cls = values_[pop()];
                if (cls.kind != Kind::global && cls.kind != Kind::refused)
                    bad(fmt::format("NEWOBJ: expected a class, got {}", brief(cls)));
                push(make_str(Kind::refused, cls.s));
                break;
            }
            case 'b': {  // BUILD: an object's state; data is kept as it is, never "set"
                pop();
                const Kind k = top("BUILD").kind;
                if (k != Kind::dict && k != Kind::tensor && k != Kind::refused)
                    bad(fmt::format("BUILD: expected an object below, got {}", kind_name(k)));
                break;
            }
            case 'Q': stack_.push_back(persistent(pop())); break;
            default:
                bad(fmt::format("opcode 0x{:02x}{}: not supported (a state dict written by torch.save "
                                "needs only protocol 2 opcodes)",
                                op, op >= 0x20 && op < 0x7f ? fmt::format(" ('{}')", char(op)) : ""));
        }
    }
}

// ---- pickler ----

Pickler::Pickler() : out_("\x80\x02") {}

void Pickler::global(std::string_view module, std::string_view name) {
    const std::string key = std::string(module) + "." + std::string(name);
    for (const auto& [k, idx] : globals_)
        if (k == key) {
            if (idx < 256) {
                out_ += 'h';
                out_ += char(idx);
            } else {
                out_ += 'j';
                for (int b = 0; b < 4; ++b) out_ += char(idx >> (8 * b));
            }
            return;
        }
    out_ += fmt::format("c{}\n{}\n", module, name);
    const uint32_t idx = static_cast<uint32_t>(globals_.size());
    globals_.emplace_back(key, idx);
    out_ += 'r';
    for (int b = 0; b < 4; ++b) out_ += char(idx >> (8 * b));
}

void Pickler::integer(int64_t v) {
    if (v >= 0 && v < 256) {
        out_ += 'K';
        out_ += char(v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        out_ += 'J';
        for (int b = 0; b < 4; ++b) out_ += char(uint32_t(v) >> (8 * b));
    } else {
        out_ += "\x8a\x08";
        for (int b = 0; b < 8; ++b) out_ += char(uint64_t(v) >> (8 * b));
    }
}

void Pickler::string(std::string_view s) {
    out_ += 'X';
    for (int b = 0; b < 4; ++b) out_ += char(uint32_t(s.size()) >> (8 * b));
    out_ += s;
}

std::string Pickler::finish() {
    out_ += '.';
    return std::move(out_);
}

}  // namespace bertbench::io::pickle
