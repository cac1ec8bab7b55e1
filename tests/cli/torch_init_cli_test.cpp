// PyTorch checkpoints through the real binary ($BB_BERTBENCH), issue 25 item 7: a short
// `bertbench pretrain` checkpoint (L2 H64 A2 I128) converted with `convert --to=pt` is loaded by
// the system torch (torch.load(weights_only=True)), which saves it again as NVIDIA's
// ckpt_<step>.pt (legacy format, 'module.bert.' names with dense_act, optimizer state, master
// params, epoch, files) and as a legacy pytorch_model.bin. Each file then (a) evaluates to the
// same metrics JSON, byte for byte, as the safetensors checkpoint, (b) starts a pretraining run
// whose losses are bit-identical to one started from the safetensors file, (c) converts back to
// the safetensors tensors bit for bit; `squad --init_checkpoint=pytorch_model.bin` fine-tunes;
// a .pt named as a safetensors file is still recognised by its magic bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_fixtures.hpp"
#include "cli/run_util.hpp"
#include "core/fs.hpp"
#include "io/safetensors.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

using testing::golden;

namespace fs = std::filesystem;
using bertbench::testing::run_bertbench;
using bertbench::testing::run_shell;
using bertbench::testing::shared_dir;
using bertbench::testing::short_pretrain_args;
using bertbench::testing::TmpDir;
using bertbench::testing::train_lines;

constexpr const char* kResave = R"(import collections, sys, torch
src, nv, legacy = sys.argv[1:4]
sd = torch.load(src, weights_only=True)
assert all(t.dtype == torch.float32 for t in sd.values())
# NVIDIA's run_pretraining.py checkpoint of a DDP-wrapped model, as torch 1.4 writes it.
def nvidia_name(k):
    if 'intermediate.dense.' in k or 'pooler.dense.' in k or 'transform.dense.' in k:
        k = k.replace('.dense.', '.dense_act.')
    return 'module.' + k
model = collections.OrderedDict((nvidia_name(k), t) for k, t in sd.items())
model['module.cls.predictions.decoder.weight'] = sd['bert.embeddings.word_embeddings.weight']
params = list(sd.values())
torch.save({'model': model,
            'optimizer': {'state': {i: {'step': 4, 'exp_avg': torch.zeros_like(p),
                                        'exp_avg_sq': torch.zeros_like(p)} for i, p in enumerate(params[:3])},
                          'param_groups': [{'lr': 6e-3, 'params': list(range(3))}]},
            'master params': params[:3], 'files': [0, 'part-0.hdf5'], 'epoch': 0, 'data_loader': None},
           nv, _use_new_zipfile_serialization=False)
torch.save(sd, legacy, _use_new_zipfile_serialization=False)
)";

// The tiny model (its config written to `config`) pretrained 4 steps into dir/a
// (a/model.ckpt-4.safetensors) and converted to `bin`, a PyTorch state dict under HF's names (the
// .bin name: --to=pt); returns convert's output.
std::string write_tiny_pt(const TmpDir& dir, const std::string& config, const std::string& bin) {
    testing::write_tiny_bert_config(config);
    const auto p = run_bertbench(short_pretrain_args(config, dir.file("a"), ""));
    EXPECT_EQ(p.exit_code, 0) << p.out;
    const auto c = run_bertbench("convert --input=" + dir.file("a/model.ckpt-4.safetensors") + " --output=" + bin);
    EXPECT_EQ(c.exit_code, 0) << c.out;
    return c.out;
}

TEST(TorchInitCli, ConvertedPtLoadsInTorchAndBackBitIdenticallySlow) {
    TmpDir dir;
    const std::string config = dir.file("bert_config.json"), bin = dir.file("pytorch_model.bin");
    const std::string st = dir.file("a/model.ckpt-4.safetensors");
    const std::string converted = write_tiny_pt(dir, config, bin);
    EXPECT_NE(converted.find("-> PyTorch checkpoint"), std::string::npos) << converted;

    const std::string nv = dir.file("ckpt_4.pt"), legacy = dir.file("legacy.bin");
    write_file_atomic(dir.file("resave.py"), kResave);
    auto r = run_shell("/usr/bin/python3 " + dir.file("resave.py") + " " + bin + " " + nv + " " + legacy);
    ASSERT_EQ(r.exit_code, 0) << r.out;

    const std::string eval = " --input_file=" + golden("eval_pick/public_128_eval100.tfrecord") +
                             " --eval_batch_size=8 --max_eval_steps=3 --threads=1";
    r = run_bertbench("eval --init_checkpoint=" + st + eval + " --json=" + dir.file("st.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string want_eval = read_file(dir.file("st.json"));
    r = run_bertbench(short_pretrain_args(config, dir.file("b"), "--init_checkpoint=" + st));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::vector<std::string> want_losses = train_lines(dir.file("b"));
    ASSERT_EQ(want_losses.size(), 4u);

    const io::SafetensorsReader ours(st);
    int k = 0;
    for (const std::string& pt : {bin, nv, legacy}) {
        SCOPED_TRACE(pt);
        const std::string n = std::to_string(k++);
        r = run_bertbench("eval --init_checkpoint=" + pt + " --bert_config_file=" + config + eval +
                          " --json=" + dir.file(n + ".json"));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find("initialised from PyTorch checkpoint"), std::string::npos) << r.out;
        EXPECT_EQ(read_file(dir.file(n + ".json")), want_eval);
        if (pt == nv) {  // the optimizer state is reported, not loaded
            EXPECT_NE(r.out.find("'optimizer' (6 tensors)"), std::string::npos) << r.out;
            EXPECT_NE(r.out.find("'master params' (3 tensors)"), std::string::npos) << r.out;
        }
        r = run_bertbench(
            short_pretrain_args(config, dir.file("p" + n), "--init_checkpoint=" + pt));
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(train_lines(dir.file("p" + n)), want_losses);
        const std::string back = dir.file(n + ".safetensors");
        r = run_bertbench("convert --input=" + pt + " --output=" + back);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const io::SafetensorsReader got(back);
        size_t compared = 0;
        for (const io::TensorInfo& t : got.tensors()) {
            const io::TensorInfo* w = ours.find(t.name);
            ASSERT_NE(w, nullptr) << t.name;
            const auto a = got.bytes(t), b = ours.bytes(*w);
            ASSERT_EQ(a.size(), b.size()) << t.name;
            EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << t.name;
            ++compared;
        }
        EXPECT_EQ(compared, 46u);  // every weight of the pretraining model: L2 with both heads
    }

    // squad --init_checkpoint=pytorch_model.bin: the encoder loaded, the span head initialised.
    r = run_bertbench("squad --vocab_file=" + golden("vocab.txt") + " --bert_config_file=" + config +
                      " --init_checkpoint=" + bin + " --do_train --train_file=" +
                      golden("squad_pipeline/train-v1.1.json") + " --output_dir=" + dir.file("sq") +
                      " --max_seq_length=64 --max_query_length=24 --doc_stride=32"
                      " --train_batch_size=8 --num_train_epochs=0.25 --threads=1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("initialised from PyTorch checkpoint " + bin), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cls/squad/output_weights"), std::string::npos) << r.out;  // missing

    // Recognised by its magic bytes whatever it is called.
    fs::copy_file(nv, dir.file("ckpt.safetensors"));
    r = run_bertbench("eval --init_checkpoint=" + dir.file("ckpt.safetensors") + " --bert_config_file=" +
                      config + eval + " --json=" + dir.file("renamed.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(read_file(dir.file("renamed.json")), want_eval);
    write_file_atomic(dir.file("junk.ckpt"), "GARBAGE!");
    r = run_bertbench("eval --init_checkpoint=" + dir.file("junk.ckpt") + " --bert_config_file=" + config + eval);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("the file starts with 47 41 52 42 41 47 45 21 (that is all of it)"), std::string::npos)
        << r.out;
}

constexpr const char* kVariants = R"(import sys, torch
src, intw, nogamma, ones, nonsp = sys.argv[1:6]
sd = torch.load(src, weights_only=True)
g = 'bert.embeddings.LayerNorm.weight'
torch.save({**sd, g: sd[g].long()}, intw)
torch.save({k: t for k, t in sd.items() if k != g}, nogamma)
torch.save({**sd, g: torch.ones_like(sd[g])}, ones)
torch.save({k: t for k, t in sd.items() if not k.startswith('cls.seq_relationship.')}, nonsp)  # BertForMaskedLM's
)";

// A .pt whose model weight holds integers is refused by convert, as a safetensors file's is (it
// was skipped); a tensor missing under --allow_missing_weights runs at its initial value in eval
// (LayerNorm gamma: 1), as in pretrain's evaluation, not as zeros.
TEST(TorchInitCli, IntegerWeightsAndMissingWeightsAsTheOtherReaders) {
    TmpDir dir;
    const std::string config = dir.file("bert_config.json"), bin = dir.file("model.bin");
    write_tiny_pt(dir, config, bin);
    ASSERT_TRUE(fs::exists(bin));
    const std::string intw = dir.file("int.bin"), nogamma = dir.file("nogamma.bin"), ones = dir.file("ones.bin"),
                      nonsp = dir.file("nonsp.bin");
    write_file_atomic(dir.file("variants.py"), kVariants);
    auto r = run_shell("/usr/bin/python3 " + dir.file("variants.py") + " " + bin + " " + intw + " " + nogamma + " " +
                       ones + " " + nonsp);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_bertbench("convert --input=" + intw + " --output=" + dir.file("int.safetensors") + " --bert_config_file=" + config);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("tensor \"bert.embeddings.LayerNorm.weight\": expected a floating-point weight, found I64"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir.file("int.safetensors")));
    const std::string eval = " --bert_config_file=" + config + " --input_file=" +
                             golden("eval_pick/public_128_eval100.tfrecord") + " --max_eval_steps=2 --threads=1";
    // without --allow_missing_weights: refused, the error the one line printed (no warning and no
    // "initialised from" line before it)
    r = run_bertbench("eval --init_checkpoint=" + nogamma + eval);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("of the model's 46 tensors are not in it"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
    r = run_bertbench("eval --init_checkpoint=" + nogamma + eval + " --allow_missing_weights --json=" + dir.file("m.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    r = run_bertbench("eval --init_checkpoint=" + ones + eval + " --json=" + dir.file("o.json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    nlohmann::json missing = nlohmann::json::parse(read_file(dir.file("m.json"))),
                   with_ones = nlohmann::json::parse(read_file(dir.file("o.json")));
    missing.erase("checkpoint");
    with_ones.erase("checkpoint");
    EXPECT_EQ(missing, with_ones);
    // pretrain from it: an encoder tensor missing is refused, as from a TF or bertbench checkpoint (it
    // was a warning, and the encoder trained partly from random values); a head missing (a
    // BertForMaskedLM file has no NSP head) starts from its initialisation, said in a warning
    r = run_bertbench(short_pretrain_args(config, dir.file("p1"), "--num_train_steps=1 --init_checkpoint=" + nogamma));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("--init_checkpoint=" + nogamma + ": 1 of the encoder's tensors are not in it (first: "
                         "bert/embeddings/LayerNorm/gamma)"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir.file("p1/model.ckpt-1.safetensors")));
    r = run_bertbench(short_pretrain_args(config, dir.file("p2"), "--num_train_steps=1 --init_checkpoint=" + nonsp));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("--init_checkpoint=" + nonsp + ": 2 tensors of the heads or pooler missing, left as initialised"),
              std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertbench
