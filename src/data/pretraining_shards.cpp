// Shard mode (see pretraining_shards.hpp): a work queue of files over std::threads.
#include "data/pretraining_shards.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/json_safe.hpp"
#include "core/log.hpp"
#include "core/timing.hpp"
#include "io/hdf5_shard.hpp"
#include "io/tfrecord.hpp"

namespace bertbench::data {
namespace fs = std::filesystem;
namespace {

nlohmann::json shard_meta(const ShardJob& job, const Vocab& vocab, const PretrainingConfig& cfg) {
    struct stat st {};
    if (::stat(job.input.c_str(), &st) != 0) fail("--input_dir: cannot stat {}", job.input);
    uint64_t vh = 0;
    for (int32_t i = 0; i < vocab.size(); ++i) vh = vh * 1000003u ^ hash_bytes(vocab.token(i));
    nlohmann::json meta = {{"input", json_safe::valid_utf8(job.input)},
            {"input_size", static_cast<uint64_t>(st.st_size)},
            {"input_mtime_ns", static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
            {"vocab_size", vocab.size()},
            {"vocab_fingerprint", fmt::format("{:016x}", vh)},
            {"config",
             {{"do_lower_case", cfg.do_lower_case},
              {"max_seq_length", cfg.max_seq_length},
              {"max_predictions_per_seq", cfg.max_predictions_per_seq},
              {"random_seed", cfg.random_seed_decimal.empty() ? std::to_string(cfg.random_seed)
                                                               : cfg.random_seed_decimal},
              {"dupe_factor", cfg.dupe_factor},
              {"masked_lm_prob", cfg.masked_lm_prob},
              {"short_seq_prob", cfg.short_seq_prob}}}};
    // only when set: shards verified before the flag existed stay verified
    if (cfg.do_whole_word_mask) meta["config"]["do_whole_word_mask"] = true;
    return meta;
}

// True if the output is complete and provably from the same input and flags.
// The records of a shard a run before made from this input with these settings, complete and
// readable; nothing when it has to be (re)made.
std::optional<uint64_t> verified_records(const ShardJob& job, const nlohmann::json& meta,
                                         const PretrainingConfig& cfg) {
    try {
        const std::string meta_path = job.output + ".meta.json";
        if (!fs::exists(meta_path) || !fs::exists(job.output)) return std::nullopt;
        const auto saved = nlohmann::json::parse(read_file(meta_path));
        for (const char* key : {"input", "input_size", "input_mtime_ns", "vocab_size",
                                "vocab_fingerprint", "config"})
            if (saved.at(key) != meta.at(key)) return std::nullopt;
        if (saved.at("output_size").get<uint64_t>() != fs::file_size(job.output)) return std::nullopt;
        const uint64_t records =
            cfg.output_format == OutputFormat::hdf5
                ? io::verify_hdf5_shard(job.output, cfg.max_seq_length, cfg.max_predictions_per_seq)
                : io::count_tfrecords(job.output);
        if (records != saved.at("records").get<uint64_t>()) return std::nullopt;
        return records;
    } catch (const std::exception&) {
        return std::nullopt;  // unreadable or corrupt: rewrite
    }
}

}  // namespace

std::vector<std::string> orphan_shards(const std::vector<ShardJob>& plan, const std::string& output_dir,
                                       const std::string& extension) {
    std::set<std::string> planned;
    for (const ShardJob& job : plan) planned.insert(fs::path(job.output).filename().string());
    const std::string sidecar = extension + ".meta.json";
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(output_dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() <= sidecar.size() || !name.ends_with(sidecar)) continue;
        const std::string shard = name.substr(0, name.size() - std::strlen(".meta.json"));
        if (!planned.count(shard) && fs::exists(fs::path(output_dir) / shard, ec))
            out.push_back((fs::path(output_dir) / shard).string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<ShardJob> plan_shards(const std::string& input_dir, const std::string& output_dir,
                                  const std::string& extension, const std::vector<std::string>& also_read) {
    std::error_code ec;
    if (!fs::is_directory(input_dir, ec))
        fail("--input_dir: \"{}\" is not a directory (hint: use --input_file for files or globs)",
             input_dir);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(input_dir)) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        if (e.is_symlink(ec) && !fs::exists(e.path(), ec))  // not one shard fewer without a word
            fail("--input_dir: {}: a symbolic link to {}, which leads nowhere (a missing target or a loop; expected "
                 "input files)",
                 e.path().string(), fs::read_symlink(e.path(), ec).string());
        if (!e.is_regular_file(ec)) continue;
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    if (names.empty()) fail("--input_dir: \"{}\" contains no input files", input_dir);
    // Every input opens now, not when its turn comes after hours of other shards
    for (const auto& name : names) {
        const std::string path = (fs::path(input_dir) / name).string();
        std::string why;
        const int fd = open_regular_file(path, &why);
        if (fd < 0) fail("--input_dir: {}: {} (expected every input file readable)", path, why);
        ::close(fd);
    }
    // The longest name a shard writes is its sidecar "<stem><extension>.meta.json"; one over
    // NAME_MAX is refused here, before --output_dir is made or any shard is (a cut, hashed
    // sidecar name would no longer be found from the output's name).
    const size_t limit = name_max(output_dir);
    for (const auto& name : names) {
        const std::string stem = fs::path(name).stem().string();
        const size_t sidecar = stem.size() + extension.size() + std::strlen(".meta.json");
        if (sidecar > limit)
            fail("--input_dir: {}: its shard's sidecar name (the stem + \"{}.meta.json\") would "
                 "be {} bytes, expected at most {} (NAME_MAX of --output_dir; hint: rename the "
                 "file to a stem of at most {} bytes)",
                 (fs::path(input_dir) / name).string(), extension, sidecar, limit,
                 limit - (sidecar - stem.size()));
    }
    std::vector<ShardJob> jobs;
    std::map<std::string, std::string> seen;  // output -> the input that maps to it
    for (const auto& name : names) {
        const std::string stem = fs::path(name).stem().string();
        const std::string out = (fs::path(output_dir) / (stem + extension)).string();
        const std::string in = (fs::path(input_dir) / name).string();
        if (const auto [it, fresh] = seen.emplace(out, in); !fresh)
            fail("--input_dir: {} and {} map to the same output {} (rename one of them)", it->second, in, out);
        jobs.push_back({in, out});
    }
    make_output_dir(output_dir, "--output_dir");  // a link that leads nowhere named as such
    if (fs::equivalent(input_dir, output_dir, ec))
        fail("--output_dir: must differ from --input_dir (\"{}\"); outputs would become inputs of "
             "the next run",
             output_dir);
    // No output writes onto what the run reads (a link in --output_dir to an input or the
    // vocabulary), nor is one a directory: one stat per file, not one per pair
    std::map<std::pair<dev_t, ino_t>, std::string> read;
    std::vector<std::string> inputs = also_read;
    for (const ShardJob& job : jobs) inputs.push_back(job.input);
    for (const std::string& path : inputs)
        if (struct stat st{}; ::stat(path.c_str(), &st) == 0) read.emplace(std::pair{st.st_dev, st.st_ino}, path);
    for (const ShardJob& job : jobs)
        for (const std::string& out : {job.output, job.output + ".meta.json"}) {
            struct stat st{};
            if (::stat(out.c_str(), &st) != 0) continue;
            if (S_ISDIR(st.st_mode)) fail("--output_dir: {}: is a directory, expected a file name to write", out);
            if (const auto it = read.find({st.st_dev, st.st_ino}); it != read.end())
                fail("--output_dir: {}: is the same file as the input {} (a link); writing the shard would destroy "
                     "the input (expected no such file, or a shard of an earlier run)", out, it->second);
        }
    return jobs;
}

std::vector<ShardJob> shards_of_rank(const std::vector<ShardJob>& plan, int rank, int ranks) {
    if (ranks < 1 || rank < 0 || rank >= ranks)
        fail("shards_of_rank: rank {} of {} is not a valid rank", rank, ranks);
    std::vector<uint64_t> size(plan.size());
    for (size_t i = 0; i < plan.size(); ++i) size[i] = fs::file_size(plan[i].input);
    std::vector<size_t> order(plan.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return size[a] > size[b]; });
    std::vector<uint64_t> load(static_cast<size_t>(ranks), 0);
    std::vector<bool> mine(plan.size(), false);
    for (size_t i : order) {
        const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
        load[r] += size[i];
        mine[i] = static_cast<int>(r) == rank;
    }
    std::vector<ShardJob> out;
    for (size_t i = 0; i < plan.size(); ++i)
        if (mine[i]) out.push_back(plan[i]);
    return out;
}

std::string plan_fingerprint(const std::vector<ShardJob>& plan) {
    std::string s;
    for (const auto& job : plan)
        s += fmt::format("{}\t{}\t{}\n", job.input, fs::file_size(job.input), job.output);
    return s;
}

ShardSummary run_shards(const std::vector<ShardJob>& jobs, const Vocab& vocab,
                        const PretrainingConfig& cfg, int threads, bool overwrite,
                        const std::string& label) {
    cfg.validate();
    ShardSummary sum;
    sum.shards = jobs.size();
    uint64_t total_bytes = 0;
    for (const auto& j : jobs) total_bytes += fs::file_size(j.input);
    const double t0 = now_s();
    std::mutex mu;
    std::atomic<size_t> next{0};
    size_t done = 0;
    uint64_t bytes_done = 0;
    std::exception_ptr first_error;
    log::Progress progress(10.0);
    auto worker = [&] {
        for (size_t k; (k = next.fetch_add(1)) < jobs.size();) {
            {
                std::lock_guard lock(mu);
                if (first_error) return;
            }
            const ShardJob& job = jobs[k];
            try {
                nlohmann::json meta = shard_meta(job, vocab, cfg);
                const std::optional<uint64_t> kept =
                    overwrite ? std::nullopt : verified_records(job, meta, cfg);
                const bool skipped = kept.has_value();
                PretrainingResult r;
                if (skipped) {  // counted as made: the summary's instances are those of every shard
                    r.instances = *kept;
                    r.bytes_in = meta["input_size"].get<uint64_t>();
                    r.bytes_out = fs::file_size(job.output);
                } else {
                    fs::remove(job.output + ".meta.json");
                    r = create_pretraining_data({job.input}, {job.output}, vocab, cfg, nullptr, 1);
                    meta["output_size"] = fs::file_size(job.output);
                    meta["records"] = r.instances;
                    write_file_atomic(job.output + ".meta.json", meta.dump(2) + "\n");
                }
                std::lock_guard lock(mu);
                ++done;
                sum.skipped += skipped;
                sum.instances += r.instances;
                if (!skipped)
                    sum.bytes_in += r.bytes_in;  // the MB/s of the shards made, not of those kept
                sum.bytes_out += r.bytes_out;
                bytes_done += r.bytes_in;  // the ETA's progress: a kept shard is done
                const double el = now_s() - t0;
                const double mbs = el > 0 ? bytes_done / 1e6 / el : 0.0;
                const double eta = mbs > 0 ? (total_bytes - bytes_done) / 1e6 / mbs : 0.0;
                if (!label.empty())
                    progress.update(fmt::format("{}: shards {}/{} ({} skipped), {:.1f} MB/s, ETA {:.0f} s",
                                                label, done, jobs.size(), sum.skipped, mbs, eta));
            } catch (const std::exception& e) {
                std::lock_guard lock(mu);
                if (!first_error)
                    first_error = std::make_exception_ptr(
                        Error(fmt::format("shard {}: {}", job.input, e.what())));
                return;
            }
        }
    };
    const int n = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
    std::vector<std::thread> pool;
    for (int t = 0; t < n; ++t) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
    if (first_error) std::rethrow_exception(first_error);
    sum.seconds = now_s() - t0;
    if (!label.empty())
        progress.finish(fmt::format("{}: {} shards ({} skipped as verified complete), {} instances, "
                                    "{:.1f} MB in {:.2f} s = {:.1f} MB/s",
                                    label, jobs.size(), sum.skipped, sum.instances, sum.bytes_in / 1e6,
                                    sum.seconds, sum.seconds > 0 ? sum.bytes_in / 1e6 / sum.seconds : 0.0));
    return sum;
}

}  // namespace bertbench::data
