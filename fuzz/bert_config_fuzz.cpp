// bert_config.json (model/config.hpp) as read by --bert_config_file: JSON with bounded nesting,
// required fields, types, bounds; a config that validates must give a parameter table (sizes
// checked for overflow and against the machine's memory, model/param_table.hpp) whose layout
// is consistent. Nothing is allocated for the parameters themselves.
#include <cstdint>

#include "fuzz_util.hpp"
#include "model/config.hpp"
#include "model/param_table.hpp"

using namespace bertbench;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    const std::string& path = file.write(data, size);
    fuzz::expect_clean([&] {
        const model::BertConfig c = model::BertConfig::from_json_file(path);
        // What a checkpoint stores reads back to the same config.
        const model::BertConfig back = model::BertConfig::from_json(c.to_json(), "round trip");
        if (back.to_json() != c.to_json()) std::abort();
        const model::ParamTable t(c, model::Heads::pretraining);
        size_t end = 0;
        for (const model::ParamInfo& p : t.entries()) {
            if (p.offset < end || p.offset % 16 != 0) std::abort();
            end = p.offset + p.size;
        }
        if (end > t.total_floats() || t.num_parameters() > t.total_floats()) std::abort();
    });
    return 0;
}
