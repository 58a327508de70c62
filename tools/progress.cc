#include "tools/progress.h"

#include <unistd.h>

#include <cassert>
#include <cstdio>
#include <utility>

namespace argsdump {
namespace {

int64_t Ticks(ProgressClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string Printf(const char* format, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

// 512 B, 3.1 KiB, 10.0 MiB, ... (binary units).
std::string Bytes(double v) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (v < 1024) return Printf("%.0f B", v);
  int unit = -1;
  while (v >= 1024 && unit + 1 < 5) {
    v /= 1024;
    ++unit;
  }
  return Printf("%.1f ", v) + kUnits[unit];
}

std::string PerSecond(double v) { return Printf(v >= 10 ? "%.0f/s" : "%.1f/s", v); }

}  // namespace

std::optional<ProgressOptions> ProgressOptionsFor(ProgressMode mode, bool stream_is_terminal) {
  if (mode == ProgressMode::kNever) return std::nullopt;
  if (mode == ProgressMode::kAuto && !stream_is_terminal) return std::nullopt;
  ProgressOptions o;
  o.in_place = stream_is_terminal;
  if (mode == ProgressMode::kAlways) o.delay = std::chrono::nanoseconds(0);
  return o;
}

ProgressMode ProgressModeFromFlag(bool given, bool value) {
  if (!given) return ProgressMode::kAuto;
  return value ? ProgressMode::kAlways : ProgressMode::kNever;
}

bool IsTerminal(int fd) { return ::isatty(fd) == 1; }

ProgressMeter::ProgressMeter(std::ostream* out, ProgressOptions options,
                             std::vector<ProgressCounter> counters)
    : out_(out),
      options_(std::move(options)),
      counters_(new Counter[counters.size()]),
      counter_count_(counters.size()) {
  for (size_t i = 0; i < counters.size(); ++i) {
    Counter& c = counters_[i];
    if (counters[i].total) {
      c.total.store(*counters[i].total, std::memory_order_relaxed);
      c.has_total.store(true, std::memory_order_relaxed);
    }
    c.spec = std::move(counters[i]);
  }
  if (out_ == nullptr) return;
  start_ = options_.clock();
  next_draw_.store(Ticks(start_) + options_.delay.count(), std::memory_order_relaxed);
}

ProgressMeter::~ProgressMeter() { Finish(); }

void ProgressMeter::Add(size_t counter, uint64_t delta) {
  if (out_ == nullptr) return;
  assert(counter < counter_count_);
  counters_[counter].done.fetch_add(delta, std::memory_order_relaxed);
  MaybeDraw(options_.clock());
}

void ProgressMeter::Add(std::initializer_list<uint64_t> deltas) {
  if (out_ == nullptr) return;
  assert(deltas.size() <= counter_count_);
  size_t i = 0;
  for (uint64_t delta : deltas) counters_[i++].done.fetch_add(delta, std::memory_order_relaxed);
  MaybeDraw(options_.clock());
}

void ProgressMeter::Set(size_t counter, uint64_t done) {
  if (out_ == nullptr) return;
  assert(counter < counter_count_);
  counters_[counter].done.store(done, std::memory_order_relaxed);
}

void ProgressMeter::SetTotal(size_t counter, uint64_t total) {
  if (out_ == nullptr) return;
  assert(counter < counter_count_);
  counters_[counter].total.store(total, std::memory_order_relaxed);
  counters_[counter].has_total.store(true, std::memory_order_relaxed);
}

void ProgressMeter::Update() {
  if (out_ == nullptr) return;
  MaybeDraw(options_.clock());
}

void ProgressMeter::MaybeDraw(ProgressClock::time_point now) {
  if (Ticks(now) < next_draw_.load(std::memory_order_relaxed)) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;  // another thread is drawing
  if (Ticks(now) < next_draw_.load(std::memory_order_relaxed)) return;
  DrawLocked(now);
  next_draw_.store(Ticks(now) + options_.interval.count(), std::memory_order_relaxed);
}

void ProgressMeter::DrawLocked(ProgressClock::time_point now) {
  const std::string line = LineAt(now);
  if (options_.in_place) {
    *out_ << '\r' << line << "\x1b[K";
    shown_ = true;
  } else {
    *out_ << line << '\n';
  }
  out_->flush();
  drawn_any_ = true;
}

void ProgressMeter::Clear() {
  if (out_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!shown_) return;
  *out_ << "\r\x1b[K";
  out_->flush();
  shown_ = false;
}

void ProgressMeter::Finish() {
  if (out_ == nullptr) return;
  const ProgressClock::time_point now = options_.clock();
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (drawn_any_ || now - start_ >= options_.delay) DrawLocked(now);
  if (shown_) {
    *out_ << '\n';
    out_->flush();
    shown_ = false;
  }
}

std::string ProgressMeter::Line() const {
  if (out_ == nullptr) return "";
  return LineAt(options_.clock());
}

std::string ProgressMeter::LineAt(ProgressClock::time_point now) const {
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = options_.label + ":";
  for (size_t i = 0; i < counter_count_; ++i) {
    const Counter& c = counters_[i];
    const uint64_t done = c.done.load(std::memory_order_relaxed);
    const bool bytes = c.spec.unit == ProgressUnit::kBytes;
    line += i == 0 ? " " : ", ";
    line += bytes ? Bytes(done) : std::to_string(done);
    if (c.has_total.load(std::memory_order_relaxed)) {
      const uint64_t total = c.total.load(std::memory_order_relaxed);
      line += "/" + (bytes ? Bytes(total) : std::to_string(total));
    }
    if (!bytes && !c.spec.name.empty()) line += " " + c.spec.name;
    if (seconds > 0) {
      line += " (" + (bytes ? Bytes(done / seconds) + "/s" : PerSecond(done / seconds)) + ")";
    }
  }
  line += Printf(counter_count_ == 0 ? " %.1f s" : ", %.1f s", seconds);
  return line;
}

}  // namespace argsdump
