// Whisper's decoding over the public model API. Each window's prompt is stepped alone (the
// prompts differ in length); then every step gathers the next token of each live hypothesis
// of each window into one gk_session_step_batch. The logit filters, the choice of tokens
// and the beams' bookkeeping run on the host over the logits rows, as openai-whisper's
// LogitFilters, GreedyDecoder and BeamSearchDecoder do; a beam that continues another's
// sequence gets a copy of its session (gk_session_copy).
#include "asr/search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "capi/model_state.h"

namespace gk::asr {
namespace {

constexpr int64_t kMaxInitialTimestamp = 50;  // 1.0 s, in timestamp steps
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kNegInfD = -std::numeric_limits<double>::infinity();

// log_sum (search.h) runs over every row of logits of a decode step (51,864 per row for
// Whisper), so it goes kLanes elements at a time in GCC/Clang vector types (SSE/AVX registers
// wherever the target has them) and takes exp without libm: 2^(x log2 e) as 2^i · e^y, i the
// nearest integer to x log2 e and y = x - i ln 2 (|y| <= ln 2 / 2, ln 2 in two parts so that y is
// exact to float rounding), e^y by its Taylor series to degree 6 (relative error below 2e-7).
// Terms below e^-87 (float's normal range) count as e^-87: nothing beside the row's
// maximum, which counts as 1.
constexpr int kLanes = 4;
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef uint32_t Bits __attribute__((vector_size(kLanes * sizeof(uint32_t))));

[[gnu::always_inline]] inline Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

[[gnu::always_inline]] inline Floats exp_nonpositive(Floats x) {
  const Floats lowest = Floats{} - 87.3365447505531f;  // -126 ln 2
  x = x < lowest ? lowest : x;
  const Floats round = Floats{} + 12582912.0f;  // 1.5 · 2^23: adding it rounds to an integer
  const Floats r = x * 1.44269504088896341f + round;
  const Floats i = r - round;
  const Floats y = x - i * 0.693145751953125f - i * 1.428606765330187e-06f;
  // r's bits are those of 1.5 · 2^23 plus i: i + 127 is the exponent field of 2^i.
  const Bits scale_bits = ((Bits)r - 0x4B400000u + 127u) << 23;
  const Floats p =
      1.0f +
      y * (1.0f + y * (0.5f + y * (1.0f / 6 + y * (1.0f / 24 + y * (1.0f / 120 + y / 720)))));
  return p * (Floats)scale_bits;
}

}  // namespace

LogSum log_sum(const float* x, int64_t from, int64_t to) {
  LogSum out;
  const float* row = x + from;
  const int64_t n = to - from;
  const int64_t whole = n / kLanes * kLanes;
  Floats lane_max = Floats{} + kNegInf;
  for (int64_t i = 0; i < whole; i += kLanes) {
    const Floats v = load(row + i);
    lane_max = v > lane_max ? v : lane_max;
  }
  float m = kNegInf;
  for (int l = 0; l < kLanes; ++l) m = lane_max[l] > m ? lane_max[l] : m;
  for (int64_t i = whole; i < n; ++i) m = row[i] > m ? row[i] : m;
  if (m == kNegInf) return out;  // nothing but masked (or no) elements
  out.argmax = from + (std::find(row, row + n, m) - row);
  // Float sums of 1024 terms at most, added up in double.
  double s = 0;
  for (int64_t block = 0; block < whole; block += 1024) {
    Floats lane_sum{};
    for (int64_t i = block; i < std::min(whole, block + 1024); i += kLanes) {
      lane_sum += exp_nonpositive(load(row + i) - m);
    }
    for (int l = 0; l < kLanes; ++l) s += double(lane_sum[l]);
  }
  for (int64_t i = whole; i < n; ++i) s += double(exp_nonpositive(Floats{} + (row[i] - m))[0]);
  out.value = double(m) + std::log(s);
  return out;
}

namespace {

double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == kNegInfD) return a;
  return a + std::log1p(std::exp(b - a));
}

// A filtered row: its log-normaliser and likeliest token.
struct Row {
  float* logits = nullptr;
  double log_norm = 0;
  int32_t best = 0;
};

// openai-whisper's SuppressBlank, SuppressTokens and ApplyTimestampRules on one row, after
// `sampled` tokens of the window.
Row filter(float* logits, int64_t n, const std::vector<int32_t>& sampled, bool timestamps,
           const Vocab& v) {
  const int32_t tb = v.timestamp_begin;
  if (sampled.empty()) {
    for (int32_t t : v.begin_suppress) logits[t] = kNegInf;
  }
  for (int32_t t : v.suppress) logits[t] = kNegInf;
  auto mask = [&](int64_t from, int64_t to) {
    std::fill(logits + std::max<int64_t>(from, 0), logits + std::min(to, n), kNegInf);
  };
  if (timestamps) {
    logits[v.no_timestamps] = kNegInf;
    const size_t len = sampled.size();
    const bool last_ts = len >= 1 && sampled[len - 1] >= tb;
    const bool penultimate_ts = len < 2 || sampled[len - 2] >= tb;
    // Timestamps come in pairs: after a pair, text (or EOT); after a lone one, a timestamp.
    if (last_ts) {
      if (penultimate_ts) {
        mask(tb, n);
      } else {
        mask(0, v.eot);
      }
    }
    // Timestamps never decrease, and a segment is never empty.
    int32_t last_timestamp = -1;
    for (int32_t t : sampled) {
      if (t >= tb) last_timestamp = t;
    }
    if (last_timestamp >= 0) {
      mask(tb, (last_ts && !penultimate_ts) ? last_timestamp : last_timestamp + 1);
    }
    if (sampled.empty()) {
      mask(0, tb);
      mask(tb + kMaxInitialTimestamp + 1, n);
    }
  }
  const LogSum text = log_sum(logits, 0, timestamps ? tb : n);
  const LogSum stamps = timestamps ? log_sum(logits, tb, n) : LogSum{};
  const double total = log_add(text.value, stamps.value);
  Row row{logits, total, int32_t(text.argmax)};
  if (stamps.argmax >= 0 && (text.argmax < 0 || logits[stamps.argmax] > logits[text.argmax])) {
    row.best = int32_t(stamps.argmax);
  }
  // Every token masked (no filter above does it alone): the window ends here.
  if (row.best < 0) {
    logits[v.eot] = 0;
    return Row{logits, 0.0, v.eot};
  }
  // A timestamp is forced when all of them together are likelier than the best text token.
  if (timestamps && text.argmax >= 0 &&
      stamps.value - total > double(logits[text.argmax]) - total) {
    mask(0, tb);
    row.log_norm = stamps.value;
    row.best = int32_t(stamps.argmax);
  }
  return row;
}

// A token drawn from softmax(logits / temperature): two passes, no buffer.
int32_t sample(const float* logits, int64_t n, float temperature, const Row& row,
               std::mt19937_64& rng) {
  const double top = logits[row.best];
  auto weight = [&](int64_t i) { return std::exp((double(logits[i]) - top) / temperature); };
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += weight(i);
  double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] == kNegInf) continue;
    u -= weight(i);
    if (u <= 0) return int32_t(i);
  }
  return row.best;  // rounding left u above 0: the likeliest token
}

// The `k` likeliest tokens of a row, likeliest first (masked ones left out).
std::vector<int32_t> top_tokens(const float* logits, int64_t n, int32_t k) {
  std::vector<int32_t> top;
  for (int64_t i = 0; i < n; ++i) {
    if (logits[i] == kNegInf) continue;
    if (int32_t(top.size()) == k && logits[i] <= logits[top.back()]) continue;
    auto at = std::upper_bound(top.begin(), top.end(), logits[i],
                               [&](float x, int32_t t) { return x > logits[t]; });
    top.insert(at, int32_t(i));
    if (int32_t(top.size()) > k) top.pop_back();
  }
  return top;
}

// Hypotheses a search at `p` uses: beam_size at temperature 0, else best_of.
int32_t hypotheses(const SearchParams& p) {
  return p.temperature > 0 ? std::max(p.best_of, 1) : std::max(p.beam_size, 1);
}

struct Hypothesis {
  int32_t slot = 0;  // index into the job's sessions
  std::vector<int32_t> tokens;
  double sum_logprob = 0;
  bool done = false;
  float* logits = nullptr;   // the row to choose its next token from
  Row row;                   // …filtered (filter_rows)
  std::vector<int32_t> top;  // …its likeliest tokens, for a beam
};

struct Candidate {
  std::vector<int32_t> tokens;  // without EOT
  double sum_logprob = 0;
};

// One window's search state.
class Search {
 public:
  Search(WindowJob& job, const SearchParams& p, const Vocab& v, std::mt19937_64& rng)
      : job_(job), p_(p), v_(v), rng_(rng) {
    beams_ = p.temperature == 0 && p.beam_size > 1;
    n_ = hypotheses(p);
    if (int32_t(job.hyps.size()) < n_) {
      fail(GK_INTERNAL, "gk_asr_transcribe: a window has " + std::to_string(job.hyps.size()) +
                            " sessions for " + std::to_string(n_) + " hypotheses");
    }
  }

  // Steps the prompt and forks the hypotheses from it.
  void start() {
    const char* fn = "gk_asr_transcribe";
    gk_session* first = job_.hyps[0];
    check(gk_session_copy(first, job_.window), fn);
    prompt_row_.resize(size_t(p_.vocab_size));
    check(
        gk_session_step(first, job_.head.data(), int32_t(job_.head.size()), 0, prompt_row_.data()),
        fn);
    if (v_.no_speech >= 0) {
      const double total = log_sum(prompt_row_.data(), 0, p_.vocab_size).value;
      job_.result.no_speech_prob = std::exp(double(prompt_row_[size_t(v_.no_speech)]) - total);
    }
    if (!job_.sot_rest.empty()) {
      check(gk_session_step(first, job_.sot_rest.data(), int32_t(job_.sot_rest.size()), 0,
                            prompt_row_.data()),
            fn);
    }
    const int64_t prompt = int64_t(job_.head.size() + job_.sot_rest.size());
    sample_len_ = std::min(p_.n_ctx / 2, p_.n_ctx - prompt);
    // Beams start as one hypothesis (Whisper's identical beams merge at the first step);
    // sampled candidates as best_of copies that each draw their own tokens.
    const int32_t start = beams_ ? 1 : n_;
    for (int32_t i = 0; i < start; ++i) {
      if (i > 0) check(gk_session_copy(job_.hyps[size_t(i)], first), fn);
      Hypothesis h;
      h.slot = i;
      if (i == 0) {
        h.logits = prompt_row_.data();
      } else {
        copies_.emplace_back(prompt_row_);
        h.logits = copies_.back().data();
      }
      live_.push_back(std::move(h));
    }
    if (sample_len_ < 1) finish_all();
  }

  // The hypotheses whose next token is to be chosen (their rows filtered first).
  void waiting(std::vector<std::pair<Search*, Hypothesis*>>& out) {
    for (Hypothesis& h : live_) {
      if (!h.done) out.emplace_back(this, &h);
    }
  }

  // Filters a hypothesis's row (and finds a beam's candidates): independent of every other
  // row, so rows are filtered on several threads.
  void filter_row(Hypothesis& h) const {
    h.row = filter(h.logits, p_.vocab_size, h.tokens, p_.timestamps, v_);
    if (beams_) h.top = top_tokens(h.logits, p_.vocab_size, p_.beam_size + 1);
  }

  // Chooses the next token of each live hypothesis; those to step go to `sessions`/`tokens`
  // and their hypotheses to `stepped` (in the same order).
  void advance(std::vector<gk_session*>& sessions, std::vector<int32_t>& tokens,
               std::vector<Hypothesis*>& stepped) {
    ++steps_;
    if (beams_) {
      advance_beams();
    } else {
      for (Hypothesis& h : live_) {
        if (h.done) continue;
        const Row& row = h.row;
        const int32_t next = p_.temperature > 0
                                 ? sample(h.logits, p_.vocab_size, p_.temperature, row, rng_)
                                 : row.best;
        h.sum_logprob += double(h.logits[next]) - row.log_norm;
        if (next == v_.eot) {
          h.done = true;
          continue;
        }
        h.tokens.push_back(next);
        if (int64_t(h.tokens.size()) >= sample_len_) h.done = true;
      }
    }
    for (Hypothesis& h : live_) {
      if (h.done || done_) continue;
      sessions.push_back(job_.hyps[size_t(h.slot)]);
      tokens.push_back(h.tokens.back());
      stepped.push_back(&h);
    }
  }

  bool done() const {
    if (done_) return true;
    return std::all_of(live_.begin(), live_.end(), [](const Hypothesis& h) { return h.done; });
  }

  // The best candidate into the job's result.
  void finish() {
    std::vector<Candidate> candidates = finished_;
    if (beams_) {
      // Too few finished beams: the likeliest live ones count as ended here.
      std::vector<const Hypothesis*> order;
      for (const Hypothesis& h : live_) order.push_back(&h);
      std::stable_sort(order.begin(), order.end(), [](const Hypothesis* a, const Hypothesis* b) {
        return a->sum_logprob > b->sum_logprob;
      });
      for (const Hypothesis* h : order) {
        if (int32_t(candidates.size()) >= p_.beam_size) break;
        candidates.push_back({h->tokens, h->sum_logprob});
      }
    } else {
      for (const Hypothesis& h : live_) candidates.push_back({h.tokens, h.sum_logprob});
    }
    if (candidates.empty()) candidates.push_back({{}, kNegInfD});  // no token could follow
    size_t best = 0;
    double best_score = kNegInfD;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const double length = double(candidates[i].tokens.size());
      const double score = length > 0 ? candidates[i].sum_logprob / length : kNegInfD;
      if (i == 0 || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    Decoded& r = job_.result;
    r.tokens = std::move(candidates[best].tokens);
    r.sum_logprob = candidates[best].sum_logprob;
    r.avg_logprob = r.sum_logprob / double(r.tokens.size() + 1);
    r.temperature = p_.temperature;
  }

 private:
  void finish_all() {
    for (Hypothesis& h : live_) h.done = true;
  }

  // openai-whisper's BeamSearchDecoder.update: the beam_size + 1 likeliest tokens of each
  // beam; the best beam_size unfinished sequences go on, the finished ones are kept (up to
  // beam_size); a beam that continues another's sequence takes a copy of its session.
  void advance_beams() {
    struct Option {
      double score;
      size_t from;
      int32_t token;
    };
    std::vector<Option> options;
    for (size_t j = 0; j < live_.size(); ++j) {
      const Hypothesis& h = live_[j];
      for (int32_t t : h.top) {
        options.push_back({h.sum_logprob + double(h.logits[t]) - h.row.log_norm, j, t});
      }
    }
    std::stable_sort(options.begin(), options.end(),
                     [](const Option& a, const Option& b) { return a.score > b.score; });
    std::vector<Hypothesis> next;
    std::vector<Candidate> ended;
    for (const Option& o : options) {
      const Hypothesis& from = live_[o.from];
      if (o.token == v_.eot) {
        ended.push_back({from.tokens, o.score});
        continue;
      }
      Hypothesis h;
      h.tokens = from.tokens;
      h.tokens.push_back(o.token);
      h.sum_logprob = o.score;
      h.slot = -1 - int32_t(o.from);  // resolved below
      next.push_back(std::move(h));
      if (int32_t(next.size()) == p_.beam_size) break;
    }
    for (Candidate& c : ended) {
      if (int32_t(finished_.size()) >= p_.beam_size) break;
      finished_.push_back(std::move(c));
    }
    // Sessions: the first beam continuing a sequence keeps its session, the others take a
    // free one (of a sequence that ended or was outranked) as a copy of it.
    std::vector<bool> taken(size_t(n_), false);
    std::vector<int32_t> owner_slot(live_.size());
    for (size_t j = 0; j < live_.size(); ++j) owner_slot[j] = live_[j].slot;
    std::vector<bool> source_kept(live_.size(), false);
    for (Hypothesis& h : next) {
      const size_t from = size_t(-1 - h.slot);
      if (!source_kept[from]) {
        source_kept[from] = true;
        h.slot = owner_slot[from];
        taken[size_t(h.slot)] = true;
      }
    }
    for (Hypothesis& h : next) {
      if (h.slot >= 0) continue;
      const size_t from = size_t(-1 - h.slot);
      const int32_t slot = int32_t(std::find(taken.begin(), taken.end(), false) - taken.begin());
      taken[size_t(slot)] = true;
      check(gk_session_copy(job_.hyps[size_t(slot)], job_.hyps[size_t(owner_slot[from])]),
            "gk_asr_transcribe");
      h.slot = slot;
    }
    live_ = std::move(next);
    if (int32_t(finished_.size()) >= p_.beam_size || live_.empty() || steps_ >= sample_len_) {
      done_ = true;
    }
  }

  WindowJob& job_;
  const SearchParams& p_;
  const Vocab& v_;
  std::mt19937_64& rng_;
  bool beams_ = false;
  int32_t n_ = 1;
  int64_t sample_len_ = 0;
  int64_t steps_ = 0;
  bool done_ = false;
  std::vector<float> prompt_row_;
  std::vector<std::vector<float>> copies_;
  std::vector<Hypothesis> live_;
  std::vector<Candidate> finished_;
};

// Runs fn(i) for i in [0, n) on a few threads, the caller's among them: a decode step's rows
// of many windows are filtered side by side (each is a pass or two over the vocabulary).
class RowThreads {
 public:
  RowThreads() {
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    for (size_t i = 1; i < std::min<size_t>(cores, kMostRowThreads); ++i) {
      threads_.emplace_back([this] { serve(); });
    }
  }
  ~RowThreads() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  RowThreads(const RowThreads&) = delete;
  RowThreads& operator=(const RowThreads&) = delete;

  void run(size_t n, const std::function<void(size_t)>& fn) {
    if (threads_.empty() || n < 2) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      fn_ = &fn;
      n_ = n;
      next_ = 0;
      busy_ = threads_.size();
      ++round_;
    }
    start_.notify_all();
    take(fn, n);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
  }

 private:
  static constexpr size_t kMostRowThreads = 16;

  void take(const std::function<void(size_t)>& fn, size_t n) {
    for (size_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
  }

  void serve() {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(size_t)>* fn = nullptr;
      size_t n = 0;
      {
        std::unique_lock<std::mutex> lock(m_);
        start_.wait(lock, [&] { return stop_ || round_ != seen; });
        if (stop_) return;
        seen = round_;
        fn = fn_;
        n = n_;
      }
      take(*fn, n);
      {
        std::lock_guard<std::mutex> lock(m_);
        --busy_;
      }
      done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable start_, done_;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  size_t busy_ = 0;
  uint64_t round_ = 0;
  bool stop_ = false;
};

}  // namespace

void Roster::step(const std::vector<gk_session*>& live, const std::vector<int32_t>& live_tokens,
                  int32_t filler, const std::function<bool(gk_session*)>& has_room) {
  auto is_live = [&](gk_session* s) {
    return std::find(live.begin(), live.end(), s) != live.end();
  };
  sessions.erase(std::remove_if(sessions.begin(), sessions.end(),
                                [&](gk_session* s) { return !is_live(s) && !has_room(s); }),
                 sessions.end());
  for (gk_session* s : live) {
    if (std::find(sessions.begin(), sessions.end(), s) == sessions.end()) sessions.push_back(s);
  }
  tokens.assign(sessions.size(), filler);
  row_of.resize(live.size());
  for (size_t i = 0; i < live.size(); ++i) {
    row_of[i] = size_t(std::find(sessions.begin(), sessions.end(), live[i]) - sessions.begin());
    tokens[row_of[i]] = live_tokens[i];
  }
}

void decode_windows(const std::vector<WindowJob*>& jobs, const SearchParams& p, const Vocab& v,
                    std::mt19937_64& rng) {
  std::vector<Search> searches;
  searches.reserve(jobs.size());
  for (WindowJob* job : jobs) {
    searches.emplace_back(*job, p, v, rng);
    searches.back().start();
  }
  RowThreads threads;
  std::vector<float> logits;
  std::vector<std::pair<Search*, Hypothesis*>> rows;
  std::vector<gk_session*> sessions;
  std::vector<int32_t> tokens;
  std::vector<Hypothesis*> stepped;
  Roster roster;
  auto has_room = [&](gk_session* s) { return gk_session_length(s) + 1 < p.n_ctx; };
  while (true) {
    rows.clear();
    for (Search& s : searches) {
      if (!s.done()) s.waiting(rows);
    }
    threads.run(rows.size(), [&](size_t i) { rows[i].first->filter_row(*rows[i].second); });
    sessions.clear();
    tokens.clear();
    stepped.clear();
    for (Search& s : searches) {
      if (!s.done()) s.advance(sessions, tokens, stepped);
    }
    if (sessions.empty()) break;
    if (p.keep_batch) roster.step(sessions, tokens, v.eot, has_room);
    const std::vector<gk_session*>& batch = p.keep_batch ? roster.sessions : sessions;
    logits.resize(batch.size() * size_t(p.vocab_size));
    check(gk_session_step_batch(batch.data(), int32_t(batch.size()),
                                p.keep_batch ? roster.tokens.data() : tokens.data(), logits.data()),
          "gk_asr_transcribe");
    for (size_t i = 0; i < stepped.size(); ++i) {
      const size_t row = p.keep_batch ? roster.row_of[i] : i;
      stepped[i]->logits = logits.data() + row * size_t(p.vocab_size);
    }
  }
  for (Search& s : searches) s.finish();
}

}  // namespace gk::asr
