// A Python OrderedDict of question id -> value as the SQuAD scripts fill it (a repeated id keeps
// its first position and its last value), and json.dumps(d, indent=4) + "\n" of one.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/py_json.hpp"

namespace bertbench::train {

template <typename V>
struct OrderedMap {
    std::vector<std::pair<std::string, V>> items;
    std::unordered_map<std::string, size_t> index;
    void set(const std::string& k, V v) {
        const auto [it, fresh] = index.emplace(k, items.size());
        if (fresh) items.emplace_back(k, std::move(v));
        else items[it->second].second = std::move(v);
    }
};

template <typename V, typename F>
std::string dump_indent4(const OrderedMap<V>& m, F&& value) {
    if (m.items.empty()) return "{}\n";
    std::string out = "{\n";
    for (size_t i = 0; i < m.items.size(); ++i) {
        out += "    ";
        append_py_json_string(out, m.items[i].first);
        out += ": ";
        value(out, m.items[i].second);
        out += i + 1 < m.items.size() ? ",\n" : "\n";
    }
    out += "}\n";
    return out;
}


}  // namespace bertbench::train
