// A restricted unpickler for PyTorch state dicts: a small pickle VM (protocols 2-5, the opcodes
// torch.save writes plus the plain-data rest) that executes nothing. GLOBAL names outside the few a
// state dict needs (collections.OrderedDict, torch._utils._rebuild_tensor[_v2],
// torch._utils._rebuild_parameter[_with_state], torch.<T>Storage) are never resolved: they become
// inert `refused` values carrying the name, so the caller can refuse the file naming the global.
// Persistent ids (torch's storages) become `storage` values. Every value lives in one arena and is
// referred to by index; the arena grows by at most a few values per opcode (linear in the bytes).
// Reference: CPython Lib/pickle.py and pickletools.py; torch/serialization.py, torch/_utils.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/safetensors.hpp"  // DType

namespace bertbench::io::pickle {

enum class Kind : uint8_t {
    none, boolean, integer, big_integer, floating, string, bytes,
    tuple, list, dict,  // dict: items = key, value, key, value ... (insertion order)
    global,             // an allowed global, not yet called (s = "module.name")
    storage,            // a persistent id ('storage', <T>Storage, key, location, numel[, view])
    tensor,             // _rebuild_tensor_v2(storage, offset, size, stride, ...)
    refused,            // anything built from a global outside the allow-list (s = that global)
};
const char* kind_name(Kind k);

struct Value {
    Kind kind = Kind::none;
    int64_t i = 0;   // boolean, integer; storage: numel; tensor: storage offset (elements)
    double f = 0;    // floating
    std::string s;   // string, bytes, big_integer (little-endian two's complement), global and
                     // refused ("module.name"), storage: key
    std::vector<uint32_t> items;         // tuple, list, dict; tensor: {storage}
    std::vector<int64_t> shape, stride;  // tensor
    DType dtype = DType::F32;            // storage
    int64_t view_offset = 0, view_numel = -1;  // storage: a legacy view of its root (elements)
    std::string location;                      // storage: "cpu", "cuda:0" ...
};

// The globals a state dict may name; everything else is refused.
bool allowed_global(std::string_view name);
// torch.FloatStorage -> F32 ... false for other names.
bool storage_dtype(std::string_view global, DType* out);

class Unpickler {
  public:
    // Runs the pickle starting at data[*pos] up to and including its STOP; *pos is left after it.
    // `label` names the input in errors ("x.pt: data.pkl"). Error (one line, with the byte offset)
    // on a malformed stream or an unsupported opcode.
    Unpickler(std::span<const std::byte> data, size_t* pos, std::string label);

    uint32_t root() const { return root_; }
    const Value& at(uint32_t i) const { return values_[i]; }
    size_t size() const { return values_.size(); }
    // The value for string key `key` in dict `d`; nullptr when absent or `d` is not a dict.
    const Value* get(const Value& d, std::string_view key) const;
    // "a dict", "an int 3", "the global posix.system" ... for messages.
    std::string brief(const Value& v) const;

  private:
    uint32_t add(Value v);
    uint32_t pop();
    std::vector<uint32_t> pop_mark();
    uint32_t call(uint32_t callable, uint32_t args);
    uint32_t persistent(uint32_t pid);
    [[noreturn]] void bad(const std::string& what) const;
    std::string utf8(std::string s) const;  // s, or bad() where it is not UTF-8

    std::string label_;
    size_t at_ = 0;  // offset of the opcode being run
    std::vector<Value> values_;
    std::vector<uint32_t> stack_;
    std::vector<size_t> marks_;
    std::unordered_map<uint32_t, uint32_t> memo_;  // one entry per PUT seen, whatever its index
    uint32_t root_ = 0;
};

// Writing: the opcodes `torch.save` emits for a state dict of tensors (protocol 2).
class Pickler {
  public:
    Pickler();
    void global(std::string_view module, std::string_view name);  // GLOBAL + memoised
    void mark() { out_ += '('; }
    void tuple() { out_ += 't'; }
    void empty_tuple() { out_ += ')'; }
    void reduce() { out_ += 'R'; }
    void setitems() { out_ += 'u'; }
    void empty_dict() { out_ += '}'; }
    void setitem() { out_ += 's'; }
    void binpersid() { out_ += 'Q'; }
    void boolean(bool b) { out_ += b ? '\x88' : '\x89'; }
    void integer(int64_t v);
    void string(std::string_view s);
    std::string finish();  // STOP; the bytes

  private:
    std::string out_;
    std::vector<std::pair<std::string, uint32_t>> globals_;
};

}  // namespace bertbench::io::pickle
