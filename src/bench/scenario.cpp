// MLPerf Inference scenarios (see scenario.hpp; rules in docs/benchmark.md "Scenarios").
#include "bench/scenario.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "core/timing.hpp"

namespace bertbench::bench {

Scenario parse_scenario(const std::string& name, const std::string& flag) {
    if (name == "singlestream") return Scenario::singlestream;
    if (name == "offline") return Scenario::offline;
    if (name == "server") return Scenario::server;
    fail("{}: expected singlestream, offline or server, got \"{}\"", flag, name);
}

const char* scenario_name(Scenario s) {
    return s == Scenario::singlestream ? "singlestream" : s == Scenario::offline ? "offline" : "server";
}

namespace {

// LoadGen's durations are whole milliseconds (min_duration_ms), generated against in ns.
int64_t duration_ns(double seconds) { return std::llround(seconds * 1e3) * 1'000'000; }

}  // namespace

void check_latency_bound(double ms, const std::string& what) {
    if (!(ms > 0 && ms <= kMaxLatencyBoundMs))
        fail("{}: expected > 0 and at most {:g} ms, got {:g}", what, kMaxLatencyBoundMs, ms);
}

void check_server_rate(double qps, int64_t min_query_count) {
    const double span_s = static_cast<double>(std::max<int64_t>(min_query_count, 1)) / qps;
    if (!(span_s <= kMaxScheduleS))
        fail("--server_target_qps={:g}: {} arrivals at this rate take {:.3g} s on average, expected at most {:g} s "
             "(--min_query_count={})",
             qps, std::max<int64_t>(min_query_count, 1), span_s, kMaxScheduleS, min_query_count);
}

int64_t performance_issue_count(const ScenarioSettings& s) {
    const double target_qps = s.loadgen_target_qps;
    const double planned = s.min_duration_s * target_qps * (s.scenario == Scenario::offline ? 1.1 : 2.0);
    if (!(planned < static_cast<double>(kMaxIssues)) && s.scenario != Scenario::server)
        fail("--min_duration_s={:g} at {:g} queries/s (--expected_{}, or the warm-up's rate without it): {:.3g} "
             "queries, expected at most {}",
             s.min_duration_s, target_qps, s.scenario == Scenario::offline ? "qps" : "latency_ms", planned,
             kMaxIssues);
    int64_t n = s.min_query_count;
    if (target_qps > 0 && s.scenario == Scenario::singlestream) {
        // LoadGen generates at a fixed period (duration_cast<ns> of 1 / target_qps) while the
        // previous query's time is before twice the duration: ceil(2D / period) + 1 queries
        const auto period_ns = static_cast<int64_t>((1.0 / target_qps) * 1e9);
        const int64_t horizon_ns = 2 * duration_ns(s.min_duration_s);
        if (period_ns > 0) n = std::max(n, (horizon_ns + period_ns - 1) / period_ns + 1);
    } else if (target_qps > 0 && s.scenario == Scenario::offline) {
        // test_settings_internal.cc: samples_per_query = max(min_query_count, uint64(1.1 D qps))
        n = std::max(n, static_cast<int64_t>(1.1 * s.min_duration_s * target_qps));
    }
    return std::max<int64_t>(n, 1);
}

Schedule make_schedule(const ScenarioSettings& s, std::vector<Query> queries, int64_t count) {
    if (queries.empty()) fail("scenario: the query set is empty");
    if (s.scenario == Scenario::server && !(s.target_qps && *s.target_qps > 0))
        fail("--server_target_qps: expected a rate > 0 queries/s for --scenario=server");
    Schedule out;
    out.settings = s;
    if (s.scenario == Scenario::singlestream) out.settings.batch_size = 1;
    if (s.scenario != Scenario::server) out.settings.target_qps.reset();
    out.queries = std::move(queries);
    const int n = static_cast<int>(out.queries.size());
    const bool in_order = s.every_query_once || s.scenario == Scenario::offline;
    std::mt19937 sample_rng(static_cast<std::mt19937::result_type>(s.sample_index_rng_seed));
    if (!in_order) {
        // GenerateQueries builds, from sample_rng, the accuracy mode's distribution (one shuffle of
        // the set) and the equal-issue one (a shuffle per started set of min_query_count) before
        // it draws: the same shuffles here, so that the draws are LoadGen's
        std::vector<size_t> idx(static_cast<size_t>(n));
        std::iota(idx.begin(), idx.end(), size_t{0});
        std::shuffle(idx.begin(), idx.end(), sample_rng);
        for (int64_t j = 0; j < s.min_query_count; j += n) {
            std::iota(idx.begin(), idx.end(), size_t{0});
            std::shuffle(idx.begin(), idx.end(), sample_rng);
        }
    }
    std::uniform_int_distribution<int> sample(0, n - 1);
    const auto draw = [&](size_t i) {
        return in_order ? static_cast<int>(i % static_cast<size_t>(n)) : sample(sample_rng);
    };
    if (s.scenario == Scenario::server) {
        // arrivals while the previous one is before min_duration_s or fewer than `count` (so the
        // last scheduled arrival reaches the duration); accuracy's every_query_once: `count`
        // exactly (LoadGen's AccuracyOnly has no duration). Integer ns, as LoadGen's timestamps.
        // LoadGen's gaps are whole ns: a rate over 1e9/s would schedule every arrival at 0
        if (!(*s.target_qps <= 1e9 && *s.target_qps * s.min_duration_s < static_cast<double>(kMaxIssues)))
            fail("--server_target_qps={:g} x --min_duration_s={:g}: expected at most {} queries (and a rate "
                 "of at most 1e9/s, LoadGen's ns clock)", *s.target_qps, s.min_duration_s, kMaxIssues);
        std::mt19937 schedule_rng(static_cast<std::mt19937::result_type>(s.schedule_rng_seed));
        std::exponential_distribution<> gap(*s.target_qps);
        int64_t t_ns = 0;
        double next_s = 0;  // the next arrival in double: past kMaxScheduleS its int64 ns would wrap
        const int64_t until_ns = s.every_query_once ? 0 : duration_ns(s.min_duration_s);
        for (int64_t prev = 0; prev < until_ns || static_cast<int64_t>(out.issues.size()) < count;) {
            if (static_cast<int64_t>(out.issues.size()) >= kMaxIssues)
                fail("--server_target_qps={:g} x --min_duration_s={:g}: expected at most {} queries",
                     *s.target_qps, s.min_duration_s, kMaxIssues);
            if (!(next_s <= kMaxScheduleS))
                fail("--server_target_qps={:g}: an arrival {:.3g} s after the start, expected at most {:g} s "
                     "(--min_duration_s={:g}, --min_query_count={})",
                     *s.target_qps, next_s, kMaxScheduleS, s.min_duration_s, s.min_query_count);
            out.issues.push_back({draw(out.issues.size()), static_cast<double>(t_ns) / 1e9});
            prev = t_ns;
            const double gap_ns = gap(schedule_rng) * 1e9;
            next_s = (static_cast<double>(t_ns) + gap_ns) / 1e9;
            if (next_s <= kMaxScheduleS) t_ns += static_cast<int64_t>(gap_ns);  // duration_cast: truncated
        }
        return out;
    }
    out.issues.resize(static_cast<size_t>(count));
    for (size_t i = 0; i < out.issues.size(); ++i) out.issues[i].q = draw(i);
    if (s.scenario == Scenario::offline) {
        for (Issue& is : out.issues) is.t = 0.0;
        std::stable_sort(out.issues.begin(), out.issues.end(), [&](const Issue& a, const Issue& b) {
            return out.queries[static_cast<size_t>(a.q)].input_ids.size() >
                   out.queries[static_cast<size_t>(b.q)].input_ids.size();
        });
    }
    return out;
}

namespace {

// What a schedule names and its raw log copies: the run's settings and the query set's size.
nlohmann::json settings_json(const ScenarioSettings& st, int64_t performance_sample_count) {
    return {{"scenario", scenario_name(st.scenario)},
            {"target_qps", st.target_qps ? nlohmann::json(*st.target_qps) : nlohmann::json(nullptr)},
            {"latency_bound_ms", st.latency_bound_ms},
            {"batch_size", st.batch_size},
            {"qsl_rng_seed", std::to_string(st.qsl_rng_seed)},
            {"sample_index_rng_seed", std::to_string(st.sample_index_rng_seed)},
            {"schedule_rng_seed", std::to_string(st.schedule_rng_seed)},
            {"min_duration_s", st.min_duration_s},
            {"min_query_count", st.min_query_count},
            {"loadgen_target_qps", st.loadgen_target_qps},
            {"performance_sample_count", performance_sample_count},
            {"accuracy_sample_count", st.accuracy_sample_count}};
}

}  // namespace

std::string schedule_json(const Schedule& s) {
    nlohmann::json j = {{"format", "bertbench-scenario-schedule/1"}};
    j.update(settings_json(s.settings, static_cast<int64_t>(s.queries.size())));
    nlohmann::json& queries = j["queries"] = nlohmann::json::array();
    for (size_t i = 0; i < s.queries.size(); ++i)
        queries.push_back({{"id", i},
                           {"unique_id", s.queries[i].unique_id},
                           {"input_ids", s.queries[i].input_ids},
                           {"segment_ids", s.queries[i].segment_ids}});
    // The issues (up to kMaxIssues) written as text, one at a time: as a JSON tree they took ~350
    // bytes each, and out of memory there ended in std::terminate (the tree's destructor allocates)
    std::string text = j.dump();
    text.pop_back();  // the closing brace
    text += ",\"issues\":[";
    for (size_t i = 0; i < s.issues.size(); ++i) {
        const Issue& is = s.issues[i];
        if (i > 0) text += ',';
        text += fmt::format("{{\"q\":{},\"t\":{}}}", is.q, is.t ? nlohmann::json(*is.t).dump() : "null");
    }
    text += "]}";
    return text;
}

std::vector<size_t> loaded_set_order(size_t n, uint64_t qsl_rng_seed) {
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 qsl_rng(static_cast<std::mt19937::result_type>(qsl_rng_seed));
    std::shuffle(order.begin(), order.end(), qsl_rng);
    return order;
}

// ---- raw log ----

nlohmann::json log_json(const RunLog& log) {
    nlohmann::json entries = nlohmann::json::array();
    for (const LogEntry& e : log.entries)
        entries.push_back({{"q", e.q},
                           {"tokens", e.tokens},
                           {"arrival", e.arrival},
                           {"start", e.start},
                           {"done", e.done},
                           {"batch", e.batch}});
    nlohmann::json j = {{"format", "bertbench-scenario-log/1"}, {"sut", log.sut}, {"threads", log.threads}};
    j.update(settings_json(log.settings, log.performance_sample_count));
    j["entries"] = std::move(entries);
    return j;
}

namespace {

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
    const auto it = j.find(key);
    if (it == j.end()) fail("{}: field \"{}\" missing (expected a bertbench-scenario-log/1 raw log)", where, key);
    // integers as JSON integers in T's range, reals finite: a float 1e300 read as an int was
    // undefined behaviour (a negative tokens/s), and an infinite time made the figures infinite
    if constexpr (std::is_integral_v<T>) {
        const bool fits = it->is_number_integer() &&
                          (it->is_number_unsigned() ? it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                                    : it->get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                          it->get<int64_t>() <= std::numeric_limits<T>::max());
        if (!fits)
            fail("{}: field \"{}\": expected an integer {} .. {}, got {}", where, key, std::numeric_limits<T>::min(),
                 std::numeric_limits<T>::max(), it->dump());
        return it->get<T>();
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!it->is_number() || !std::isfinite(it->get<double>()))
            fail("{}: field \"{}\": expected a finite number, got {}", where, key, it->dump());
        return it->get<T>();
    } else {
        if (!it->is_string()) fail("{}: field \"{}\": expected a string, got {}", where, key, it->dump());
        return it->get<T>();
    }
}

}  // namespace

RunLog parse_log_json(const nlohmann::json& j, const std::string& where, const ScenarioSettings& defaults,
                      std::vector<std::string>* missing) {
    if (!j.is_object() || j.value("format", std::string()) != "bertbench-scenario-log/1")
        fail("{}: expected a raw scenario log (\"format\": \"bertbench-scenario-log/1\"), got {}", where,
             j.is_object() && j.contains("format") ? "format " + j["format"].dump() : "no \"format\" field");
    RunLog log;
    log.settings = defaults;
    log.sut = field<std::string>(j, "sut", where);
    log.settings.scenario = parse_scenario(field<std::string>(j, "scenario", where), where + ": scenario");
    if (j.contains("target_qps") && !j["target_qps"].is_null())
        log.settings.target_qps = field<double>(j, "target_qps", where);
    else
        log.settings.target_qps.reset();
    log.settings.latency_bound_ms = field<double>(j, "latency_bound_ms", where);
    check_latency_bound(log.settings.latency_bound_ms, where + ": field \"latency_bound_ms\"");
    log.settings.batch_size = field<int>(j, "batch_size", where);
    log.threads = field<int>(j, "threads", where);
    const auto at_least = [&](const char* key, double value, double lo) {
        if (!(value >= lo)) fail("{}: field \"{}\": expected at least {}, got {}", where, key, lo, value);
    };
    at_least("batch_size", log.settings.batch_size, 1);
    at_least("threads", log.threads, 1);
    // the optional settings a log copies from its schedule
    const auto optional = [&](const char* key, auto& value) {
        if (!j.contains(key)) {
            if (missing) missing->push_back(key);
            return;
        }
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
            const std::string text = field<std::string>(j, key, where);
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
            if (text.empty() || ec != std::errc() || end != text.data() + text.size())
                fail("{}: field \"{}\": expected a 64-bit seed in decimal, got \"{}\"", where, key, text);
        } else {
            value = field<T>(j, key, where);
        }
    };
    optional("qsl_rng_seed", log.settings.qsl_rng_seed);
    optional("sample_index_rng_seed", log.settings.sample_index_rng_seed);
    optional("schedule_rng_seed", log.settings.schedule_rng_seed);
    optional("min_duration_s", log.settings.min_duration_s);
    optional("min_query_count", log.settings.min_query_count);
    optional("loadgen_target_qps", log.settings.loadgen_target_qps);
    optional("performance_sample_count", log.performance_sample_count);
    optional("accuracy_sample_count", log.settings.accuracy_sample_count);
    at_least("min_duration_s", log.settings.min_duration_s, 0);
    at_least("min_query_count", static_cast<double>(log.settings.min_query_count), 1);
    at_least("performance_sample_count", static_cast<double>(log.performance_sample_count), 0);
    const auto it = j.find("entries");
    if (it == j.end() || !it->is_array() || it->empty())
        fail("{}: \"entries\": expected a non-empty array of {{q, tokens, arrival, start, done, batch}}", where);
    for (size_t i = 0; i < it->size(); ++i) {
        const nlohmann::json& e = (*it)[i];
        const std::string w = fmt::format("{}: entries[{}]", where, i);
        if (!e.is_object()) fail("{}: expected an object {{q, tokens, arrival, start, done, batch}}", w);
        LogEntry x{field<int>(e, "q", w),          field<int>(e, "tokens", w), field<double>(e, "arrival", w),
                   field<double>(e, "start", w),   field<double>(e, "done", w), field<int64_t>(e, "batch", w)};
        // (int64 ns, LoadGen's clock: kMaxLogS keeps every time and difference in range)
        if (!(0 <= x.arrival && x.arrival <= x.start && x.start <= x.done && x.done <= kMaxLogS))
            fail("{}: expected 0 <= arrival <= start <= done <= {:g} (seconds after the run's start), got {} / {} / {}",
                 w, kMaxLogS, x.arrival, x.start, x.done);
        const int64_t queries = log.performance_sample_count;
        if (x.q < 0 || (queries > 0 && x.q >= queries))
            fail("{}: field \"q\": expected a query of the set, 0 .. {}, got {}", w,
                 queries > 0 ? std::to_string(queries - 1) : "", x.q);
        if (x.tokens < 1) fail("{}: field \"tokens\": expected at least 1, got {}", w, x.tokens);
        if (x.batch < 0) fail("{}: field \"batch\": expected a batch's ordinal >= 0, got {}", w, x.batch);
        log.entries.push_back(x);
    }
    return log;
}

// ---- the SUT loop ----

SutClock SutClock::steady() {
    using C = std::chrono::steady_clock;
    return {[] { return std::chrono::duration<double>(C::now().time_since_epoch()).count(); },
            [](double t) {
                std::this_thread::sleep_until(
                    C::time_point(std::chrono::duration_cast<C::duration>(std::chrono::duration<double>(t))));
            }};
}

RunLog run_schedule(const Schedule& s, const RunBatch& run, const SutClock& clock, const std::string& sut,
                    int threads) {
    RunLog log;
    log.sut = sut;
    log.settings = s.settings;
    log.threads = threads;
    log.performance_sample_count = static_cast<int64_t>(s.queries.size());
    const size_t n = s.issues.size();
    log.entries.resize(n);
    const int B = std::max(1, s.settings.batch_size);
    size_t next = 0;  // the first issue not yet served
    // arrival of issue i: its time, or the completion of issue i-1 (chained); none = not known yet
    const auto arrival = [&](size_t i) -> std::optional<double> {
        if (s.issues[i].t) return *s.issues[i].t;
        if (i == 0) return 0.0;
        if (i - 1 < next) return log.entries[i - 1].done;
        return std::nullopt;
    };
    std::vector<int> batch;
    int64_t ordinal = 0;
    const double t0 = clock.now();
    while (next < n) {
        double now = clock.now() - t0;
        // singlestream ends as LoadGen's does ("Ending naturally", issue_query_controller.cc):
        // after an issue, once min_query_count are issued and that issue's own time has reached
        // min_duration_s (so LoadGen's min-duration clock, the last issue, holds); an accuracy run
        // issues every query (LoadGen's AccuracyOnly never ends early)
        if (!s.settings.every_query_once && !s.issues[next].t && next > 0 &&
            static_cast<int64_t>(next) >= s.settings.min_query_count &&
            log.entries[next - 1].arrival >= s.settings.min_duration_s) {
            log.entries.resize(next);
            break;
        }
        const double a = *arrival(next);  // the previous issue is served: known
        if (a > now) {
            clock.wait_until(t0 + a);
            now = std::max(a, clock.now() - t0);
        }
        size_t end = next;
        batch.clear();
        while (end < n && static_cast<int>(end - next) < B) {
            const std::optional<double> ai = arrival(end);
            if (!ai || *ai > now) break;
            batch.push_back(s.issues[end].q);
            ++end;
        }
        ++ordinal;
        run(batch);
        const double done = clock.now() - t0;
        for (size_t i = next; i < end; ++i) {
            const int q = s.issues[i].q;
            log.entries[i] = {q, static_cast<int>(s.queries[static_cast<size_t>(q)].input_ids.size()),
                              *arrival(i), now, done, ordinal};
        }
        next = end;
    }
    return log;
}

// ---- statistics ----

int64_t early_stopping_min_passing(int64_t t, double p) {
    // P(at most t of n = h + t exceed), each exceeding with probability 1 - p: the binomial
    // terms summed in log space.
    const auto at_most = [&](int64_t h) {
        const double n = static_cast<double>(h + t);
        double sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
            const double k = static_cast<double>(j);
            sum += std::exp(std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1) +
                            k * std::log1p(-p) + (n - k) * std::log(p));
        }
        return sum;
    };
    int64_t hi = 1;
    while (at_most(hi) >= 0.01) hi *= 2;  // the probability falls as h grows
    int64_t lo = hi / 2 + 1;               // at_most(hi / 2) >= 0.01 (or hi = 1)
    if (hi == 1) return 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (at_most(mid) < 0.01) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

namespace {

// LoadGen's percentile: sorted[floor(n x p)] (results.cc), one rank above nearest-rank where
// n x p is whole.
double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

double loadgen_percentile(const std::vector<int64_t>& sorted_ns, double p) {
    if (sorted_ns.empty()) return 0;
    const auto i = static_cast<size_t>(static_cast<double>(sorted_ns.size()) * p);
    return ms(sorted_ns[std::min(i, sorted_ns.size() - 1)]);
}

// LoadGen's SingleStream early-stopping estimate at percentile p (results.cc EarlyStopping):
// the least queries it needs, h(1) + 1, and, given that many, the most queries t over the
// estimate that n allow (h(t) + t <= n, increasing in t) and the estimate sorted[n - t].
struct EarlyEstimate {
    int64_t least = 0, t = 0;
    double ms = 0;
};
EarlyEstimate early_estimate(const std::vector<int64_t>& sorted, double p) {
    EarlyEstimate e;
    const auto n = static_cast<int64_t>(sorted.size());
    e.least = early_stopping_min_passing(1, p) + 1;
    if (n < e.least) return e;
    int64_t lo = 1, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (early_stopping_min_passing(mid, p) + mid <= n) lo = mid;
        else hi = mid - 1;
    }
    e.t = lo;
    e.ms = ms(sorted[static_cast<size_t>(n - lo)]);
    return e;
}

}  // namespace

ScenarioStats summarize(const RunLog& log) {
    ScenarioStats st;
    const ScenarioSettings& s = log.settings;
    st.queries = static_cast<int64_t>(log.entries.size());
    std::vector<int64_t> lat;  // integer ns, as LoadGen's QuerySampleLatency
    double tokens = 0, last_arrival = 0;
    std::vector<int64_t> batch_ids;
    for (const LogEntry& e : log.entries) {
        lat.push_back(std::llround(1e9 * (e.done - e.arrival)));
        tokens += e.tokens;
        st.duration_s = std::max(st.duration_s, e.done);
        // the final query is the last issued, wherever the log lists it
        if (e.arrival >= last_arrival) last_arrival = e.arrival, st.final_query_done_s = e.done;
        batch_ids.push_back(e.batch);
    }
    std::sort(batch_ids.begin(), batch_ids.end());
    st.batches = std::unique(batch_ids.begin(), batch_ids.end()) - batch_ids.begin();
    st.mean_batch_size = st.batches > 0 ? static_cast<double>(st.queries) / static_cast<double>(st.batches) : 0;
    if (st.duration_s > 0) {
        st.samples_per_s = static_cast<double>(st.queries) / st.duration_s;
        st.tokens_per_s = tokens / st.duration_s;
    }
    if (s.scenario == Scenario::server && last_arrival > 0)
        st.scheduled_qps = static_cast<double>(st.queries - 1) / last_arrival;  // LoadGen's: the first at 0
    std::sort(lat.begin(), lat.end());
    st.latency_ms_p50 = loadgen_percentile(lat, 0.50);
    st.latency_ms_p90 = loadgen_percentile(lat, 0.90);
    st.latency_ms_p95 = loadgen_percentile(lat, 0.95);
    st.latency_ms_p97 = loadgen_percentile(lat, 0.97);
    st.latency_ms_p99 = loadgen_percentile(lat, 0.99);
    st.latency_ms_p999 = loadgen_percentile(lat, 0.999);
    st.latency_ms_min = lat.empty() ? 0 : ms(lat.front());
    st.latency_ms_max = lat.empty() ? 0 : ms(lat.back());
    // LoadGen's mean: the integer sum over the count, truncated to ns
    st.latency_ms_mean = lat.empty() ? 0 : ms(std::accumulate(lat.begin(), lat.end(), int64_t{0}) / st.queries);
    const auto invalid = [&](std::string why) {
        st.valid = false;
        st.invalid_reasons.push_back(std::move(why));
    };
    st.min_queries_met = st.queries >= s.min_query_count;
    if (!st.min_queries_met)
        invalid(fmt::format("{} queries < min_query_count {}", st.queries, s.min_query_count));
    // LoadGen's clocks for the minimum duration (results.cc MinDurationMet)
    st.min_duration_clock_s = s.scenario == Scenario::offline ? st.duration_s : last_arrival;
    st.min_duration_met = st.min_duration_clock_s >= s.min_duration_s;
    if (!st.min_duration_met)
        invalid(fmt::format("{} {:.3f} s < min_duration_s {:g} s",
                            s.scenario == Scenario::offline  ? "duration"
                            : s.scenario == Scenario::server ? "last scheduled arrival"
                                                             : "last issue",
                            st.min_duration_clock_s, s.min_duration_s));
    const int64_t n = st.queries;
    if (s.scenario == Scenario::server) {
        // in integer ns, as LoadGen's target_latency
        const int64_t bound_ns = std::llround(s.latency_bound_ms * 1e6);
        st.latency_met = std::llround(st.latency_ms_p99 * 1e6) <= bound_ns;
        if (!st.latency_met)
            invalid(fmt::format("99th-percentile latency {:.3f} ms > latency bound {:g} ms", st.latency_ms_p99,
                                s.latency_bound_ms));
        st.overlatency_queries = lat.end() - std::upper_bound(lat.begin(), lat.end(), bound_ns);
        st.early_stopping_least_queries =
            early_stopping_min_passing(st.overlatency_queries, 0.99) + st.overlatency_queries;
        st.early_stopping_met = n >= st.early_stopping_least_queries;
        if (!st.early_stopping_met)
            invalid(fmt::format("early stopping: {} queries over the bound need {} queries in all, got {}",
                                st.overlatency_queries, st.early_stopping_least_queries, n));
    } else if (s.scenario == Scenario::singlestream) {
        const EarlyEstimate p90 = early_estimate(lat, 0.90), p99 = early_estimate(lat, 0.99);
        st.early_stopping_least_queries = p90.least;
        st.early_stopping_least_queries_p99 = p99.least;
        st.early_stopping_discarded = std::max<int64_t>(p90.t - 1, 0);
        if (n >= p90.least) st.latency_ms_early_stopping = p90.ms;
        if (n >= p99.least) st.latency_ms_early_stopping_p99 = p99.ms;
        st.early_stopping_met = n >= p90.least;
        if (!st.early_stopping_met) invalid(fmt::format("early stopping: {} queries, need at least {}", n, p90.least));
    }
    return st;
}

namespace {

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json stats_json(const ScenarioStats& st) {
    return {{"queries", st.queries},
            {"duration_s", st.duration_s},
            {"samples_per_second", st.samples_per_s},
            {"tokens_per_second", st.tokens_per_s},
            {"scheduled_qps", st.scheduled_qps},
            {"min_duration_clock_s", st.min_duration_clock_s},
            {"latency_ms_early_stopping_p90", optional_json(st.latency_ms_early_stopping)},
            {"latency_ms_early_stopping_p99", optional_json(st.latency_ms_early_stopping_p99)},
            {"overlatency_queries", st.overlatency_queries},
            {"latency_ms", {{"p50", st.latency_ms_p50},
                            {"p90", st.latency_ms_p90},
                            {"p95", st.latency_ms_p95},
                            {"p97", st.latency_ms_p97},
                            {"p99", st.latency_ms_p99},
                            {"p99.9", st.latency_ms_p999},
                            {"mean", st.latency_ms_mean},
                            {"min", st.latency_ms_min},
                            {"max", st.latency_ms_max}}},
            {"batches", st.batches},
            {"mean_batch_size", st.mean_batch_size},
            {"result", st.valid ? "VALID" : "INVALID"},
            {"invalid_reasons", st.invalid_reasons}};
}

std::string stats_line(const RunLog& log, const ScenarioStats& st) {
    const ScenarioSettings& s = log.settings;
    std::string figure;
    switch (s.scenario) {
        case Scenario::singlestream:
            figure = fmt::format("90th-percentile latency {:.3f} ms ({})", st.latency_ms_p90,
                                 st.latency_ms_early_stopping
                                     ? fmt::format("early-stopping estimate {:.3f} ms", *st.latency_ms_early_stopping)
                                     : fmt::format("no early-stopping estimate: {} queries < {}", st.queries,
                                                   st.early_stopping_least_queries));
            break;
        case Scenario::offline:
            figure = fmt::format("{:.2f} samples/s, {:.0f} tokens/s", st.samples_per_s, st.tokens_per_s);
            break;
        case Scenario::server:
            figure = fmt::format("target {:g} queries/s (scheduled {:.2f}), 99th-percentile latency {:.3f} ms "
                                 "(bound {:g} ms)",
                                 s.target_qps.value_or(0), st.scheduled_qps, st.latency_ms_p99, s.latency_bound_ms);
            break;
    }
    std::string reasons;
    for (const std::string& r : st.invalid_reasons) reasons += (reasons.empty() ? ": " : "; ") + r;
    return fmt::format("{} {}: {} queries in {:.3f} s, {}, mean batch {:.2f}: {}{}", log.sut, scenario_name(s.scenario),
                       st.queries, st.duration_s, figure, st.mean_batch_size, st.valid ? "VALID" : "INVALID",
                       reasons);
}

nlohmann::json scenario_definitions() {
    return {{"query", "one run_squad.py eval feature at its real length (input_mask == 1 tokens)"},
            {"batching", "dynamic batching, FIFO, up to batch_size, no waiting for a fuller batch: whenever the SUT "
                         "is free it runs the arrived, unserved issues in issue order, at most batch_size"},
            {"latency", "completion - arrival of an issue (the batch's end - the issue's arrival)"},
            {"percentile", "LoadGen's: sorted[floor(n x p)] of the run's n issue latencies (0-based)"},
            {"duration_s", "the last completion, seconds after the run's start (t = 0)"},
            {"samples_per_second", "issues / duration_s"},
            {"tokens_per_second", "real tokens of the issues / duration_s"},
            {"scheduled_qps", "server: (issues - 1) / the last arrival (LoadGen's scheduled samples per second)"},
            {"mean_batch_size", "issues / batches"},
            {"singlestream", "batch 1, each issue arrives when the previous completes; figures: p90 latency and "
                             "LoadGen's early-stopping estimate of it (the sorted latency at 0-based index n - t)"},
            {"offline", "every issue arrives at t = 0, longest first; figures: samples/s and tokens/s"},
            {"server", "Poisson arrivals at target_qps; valid iff p99 latency <= latency_bound_ms and early "
                       "stopping holds"},
            {"invalid", "fewer issues than min_query_count; LoadGen's clock short of min_duration_s (singlestream: "
                        "the last issue's arrival, server: the last scheduled arrival, offline: duration_s); "
                        "singlestream and server: fewer issues than early stopping needs; server: p99 above the "
                        "bound"}};
}

std::optional<std::string> unmeetable_target(const ScenarioSettings& s, double one_query_ms, int median_tokens,
                                             double capacity_qps) {
    if (s.scenario != Scenario::server || s.every_query_once) return std::nullopt;  // accuracy: no rule
    if (one_query_ms > s.latency_bound_ms)
        return fmt::format("--latency_bound_ms={:g}: one query of median length ({} tokens) alone takes {:.3f} ms "
                           "on this SUT (warm-up): no rate can meet the bound",
                           s.latency_bound_ms, median_tokens, one_query_ms);
    if (s.target_qps && capacity_qps > 0 && *s.target_qps > capacity_qps)
        return fmt::format("--server_target_qps={:g}: above the {:.2f} queries/s this SUT serves with full batches "
                           "of {} median-length queries (warm-up): the queue would grow without bound",
                           *s.target_qps, capacity_qps, s.batch_size);
    return std::nullopt;
}

PeakSearch find_peak(double start_qps, double precision, int max_runs, double max_qps,
                     const std::function<bool(double)>& valid_at) {
    PeakSearch out;
    std::optional<double> lo, hi;  // highest valid, lowest invalid
    const auto trial = [&](double qps) {
        const bool ok = valid_at(qps);
        out.tried.emplace_back(qps, ok);
        if (ok) lo = std::max(lo.value_or(qps), qps);
        else hi = std::min(hi.value_or(qps), qps);
    };
    double qps = std::min(start_qps, max_qps);
    while (static_cast<int>(out.tried.size()) < max_runs && !(lo && hi)) {
        trial(qps);
        if (lo && *lo >= max_qps) {  // valid at the cap: a higher rate is one a single run refuses
            out.at_cap = true;
            break;
        }
        qps = lo && !hi ? std::min(qps * 2, max_qps) : qps / 2;
    }
    while (static_cast<int>(out.tried.size()) < max_runs && lo && hi && *hi - *lo > precision * *lo)
        trial(0.5 * (*lo + *hi));
    out.peak_qps = lo;
    return out;
}

}  // namespace bertbench::bench
