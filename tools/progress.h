// A progress line for long command-line work (dump_viewer exports and
// compares, sim_run), written to one stream, stderr in the tools:
//   export: 120/4000 args (310/s), 1.2 GiB/3.0 GiB (95.1 MiB/s), 3.9 s
// Invariants: nothing is drawn before the work has run `delay` (a quick
// command prints nothing), then at most one line per `interval`; nothing
// is written anywhere but the stream given; after Finish(), nothing more.
#ifndef ARGSDUMP_TOOLS_PROGRESS_H_
#define ARGSDUMP_TOOLS_PROGRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace argsdump {

using ProgressClock = std::chrono::steady_clock;

// What a counter counts: things ("12/40 args") or bytes ("3.1 MiB/10.0 MiB").
enum class ProgressUnit { kCount, kBytes };

struct ProgressCounter {
  std::string name;  // after a count ("args"); a byte counter shows its unit instead
  ProgressUnit unit = ProgressUnit::kCount;
  std::optional<uint64_t> total;  // "done/total" when known, else "done"
};

struct ProgressOptions {
  std::string label;  // "export"
  // Redraw one line in place ('\r', erase to the end), for a terminal;
  // otherwise one line per update, for a log.
  bool in_place = false;
  std::chrono::nanoseconds delay = std::chrono::milliseconds(500);
  std::chrono::nanoseconds interval = std::chrono::milliseconds(250);
  // Tests inject a clock they advance by hand.
  std::function<ProgressClock::time_point()> clock = [] { return ProgressClock::now(); };
};

// --progress / --noprogress / neither, as the tools' flags say it.
enum class ProgressMode { kAuto, kAlways, kNever };

// The mode a tool's bool --progress flag gives: kAuto when the flag was not
// given, else kAlways (--progress) or kNever (--noprogress).
ProgressMode ProgressModeFromFlag(bool given, bool value);

// How a tool shows progress on a stream that is (or is not) a terminal:
// kAuto only on a terminal, once the work outlasts the default delay;
// kAlways from the start, in place on a terminal, a line per update
// elsewhere; kNever (and kAuto off a terminal) not at all (nullopt).
std::optional<ProgressOptions> ProgressOptionsFor(ProgressMode mode, bool stream_is_terminal);

// Whether the file descriptor is a terminal (isatty), e.g. STDERR_FILENO.
bool IsTerminal(int fd);

// Thread-safe: Add/Set/SetTotal/Update/Clear/Finish may be called from any
// thread; each Add/Update reads the clock once and draws only when due.
class ProgressMeter {
 public:
  // A meter that draws nothing (progress off); every call is a no-op.
  ProgressMeter() = default;
  // Draws on `*out` (which must outlive the meter). Counters are shown in
  // this order; `Add(i, ...)` names them by position.
  ProgressMeter(std::ostream* out, ProgressOptions options, std::vector<ProgressCounter> counters);
  ProgressMeter(const ProgressMeter&) = delete;
  ProgressMeter& operator=(const ProgressMeter&) = delete;
  ~ProgressMeter();  // Finish()

  bool enabled() const { return out_ != nullptr; }
  void Add(size_t counter, uint64_t delta);
  // Adds deltas[i] to counter i, then draws once if due: one item of so
  // many bytes done is Add({1, bytes}).
  void Add(std::initializer_list<uint64_t> deltas);
  // Set and SetTotal store a value and draw nothing: a sampler that reads
  // counts kept elsewhere sets each counter, then calls Update (or Finish).
  void Set(size_t counter, uint64_t done);
  void SetTotal(size_t counter, uint64_t total);
  // Draws if due without adding (a caller's own wait loop).
  void Update();
  // Erases an in-place line, before the caller writes to the same terminal
  // (it is drawn again when next due). No-op for line-per-update output.
  void Clear();
  // Draws the final state if anything was drawn or the work outlasted the
  // delay, and ends an in-place line. Idempotent.
  void Finish();

  // The line as it would be drawn now (tests, and callers that log it).
  std::string Line() const;

 private:
  struct Counter {
    ProgressCounter spec;
    std::atomic<uint64_t> done{0};
    std::atomic<uint64_t> total{0};
    std::atomic<bool> has_total{false};
  };
  void MaybeDraw(ProgressClock::time_point now);
  void DrawLocked(ProgressClock::time_point now);  // holds mu_
  std::string LineAt(ProgressClock::time_point now) const;

  std::ostream* out_ = nullptr;
  ProgressOptions options_;
  std::unique_ptr<Counter[]> counters_;
  size_t counter_count_ = 0;
  ProgressClock::time_point start_;
  // The first moment a draw may happen (start + delay, then last + interval),
  // in clock ticks; read without the lock so Add stays cheap when not due.
  std::atomic<int64_t> next_draw_{0};
  std::mutex mu_;  // guards the stream and the fields below
  bool shown_ = false;     // an in-place line is on the screen
  bool drawn_any_ = false;
  bool finished_ = false;
};

}  // namespace argsdump

#endif  // ARGSDUMP_TOOLS_PROGRESS_H_
