// JSON carried in checkpoint metadata strings (model/checkpoint.hpp, data/pretrain_reader.hpp):
// the input is the text of a metadata value. It is stored as "bert_config" in an in-memory
// checkpoint whose tensors follow the tiny seed config (or the input's own config when that one
// is small), which is then opened as --init_checkpoint / resume does: CheckpointReader::config(),
// load_checkpoint(); and it is given to PretrainReader::restore() as a saved reader state.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_safe.hpp"
#include "data/pretrain_reader.hpp"
#include "fuzz_util.hpp"
#include "model/checkpoint.hpp"
#include "recipe.hpp"

using namespace bertbench;

namespace {

// A safetensors image of `table` (all zeros) with `bert_config` as metadata.
std::string checkpoint_image(const model::ParamTable& table, const std::string& bert_config) {
    nlohmann::json header;
    header["__metadata__"] = {{"format", model::kCheckpointFormat}, {"bert_config", bert_config}};
    size_t offset = 0;
    for (const model::ParamInfo& p : table.entries()) {
        header[p.name] = {{"dtype", "F32"},
                          {"shape", p.shape},
                          {"data_offsets", {offset, offset + 4 * p.size}}};
        offset += 4 * p.size;
    }
    const std::string text =
        header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string out(8, '\0');
    const uint64_t n = text.size();
    std::memcpy(out.data(), &n, 8);  // little-endian host
    out += text;
    out.append(offset, '\0');
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    static const model::ParamTable seed_table(fuzz::tiny_config(), model::Heads::pretraining);
    const std::string text(reinterpret_cast<const char*>(data), size);

    // The input's own config, when it parses and is small, lays out the stored tensors.
    const model::ParamTable* table = &seed_table;
    model::ParamTable own;
    fuzz::expect_clean([&] {
        const model::BertConfig c = model::BertConfig::from_json(
            json_safe::parse(text, "fuzz", "a config"), "fuzz");
        c.validate("fuzz");
        model::ParamTable t(c, model::Heads::pretraining);
        if (t.entries().size() <= 64 && t.total_floats() <= (1u << 16)) {  // keep execs fast
            own = std::move(t);
            table = &own;
        }
    });
    const std::string image = checkpoint_image(*table, text);
    const std::string& path =
        file.write(reinterpret_cast<const uint8_t*>(image.data()), image.size());
    fuzz::expect_clean([&] {
        std::vector<float> buf(table->total_floats());
        // CheckpointReader::config() parses the text; the sizes are compared with the table's,
        // then every tensor is loaded.
        model::load_checkpoint(path, *table, buf);
    });

    // The same text as a saved reader state (no file is read before next()).
    fuzz::expect_clean([&] {
        data::PretrainReaderConfig rc;
        rc.files = {"/nonexistent/fuzz.tfrecord"};
        data::PretrainReader reader(rc);
        reader.restore(json_safe::parse(text, "fuzz: __metadata__[\"reader_state\"]", "JSON"));
        const nlohmann::json back = reader.state();
        if (back.at("seed") != rc.seed) std::abort();
    });
    return 0;
}
