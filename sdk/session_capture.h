// A session's dump, from the region to the finished capture: the dump
// region and its recorder, the collector draining it, the sink it writes
// to (sdk/session_sink.h), the capture's description (name, level, scope,
// labels, kernel table); at the end, the collector stopped and reconciled,
// a dead device's running tasks recorded, what is known only then amended,
// the capture exported; streamed exception dumps sent as captures of their
// own.
//
// Order: Start (collecting starts there unless the device has its own
// process: then StartCollecting, once it was forked), then Finish, then
// UploadExceptionDumps. One thread calls them; the collector's threads run
// between StartCollecting and Finish.
#ifndef ARGSDUMP_SDK_SESSION_CAPTURE_H_
#define ARGSDUMP_SDK_SESSION_CAPTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collector/collector.h"
#include "collector/refused_record_dump.h"
#include "device/dump_config.h"
#include "device/recorder.h"
#include "device/region.h"
#include "device/sim/kernel.h"
#include "proto/argsdump/v1/record.pb.h"
#include "sdk/argsdump.h"
#include "sdk/crash_readback.h"
#include "sdk/device_crash.h"
#include "sdk/session_place.h"
#include "sdk/session_setup.h"
#include "sdk/session_sink.h"
#include "sdk/wiring.h"

namespace argsdump {

class SessionCapture {
 public:
  struct Context {
    // The session's; each outlives the capture (`config` may change:
    // SetDumpConfig).
    const KernelRegistry* kernels = nullptr;
    const SessionOptions* options = nullptr;
    const SessionWiring* wiring = nullptr;
    const DumpConfig* config = nullptr;
    SessionPlace place;  // the session's name and folders
    CaptureLabels labels;
    std::optional<v1::JobMember> job;  // the job it is a rank of
    bool isolated = false;  // the device has its own process
    // Prints and keeps a WARNING.
    std::function<void(const std::string&)> warn;
  };

  explicit SessionCapture(Context context) : c_(std::move(context)) {}

  // The region, the recorder, the collector and the sink (for an isolated
  // session that streams, the sink waits for StartCollecting: a gRPC channel
  // starts threads, and the fork needs a process without). Logs the
  // buffers made in `report`.
  absl::Status Start(SessionReport* report);
  // The region could not be allocated (Start's error is then internal, not
  // the configuration's).
  bool region_failed() const { return region_failed_; }
  // The sink if none was made yet, and the collector's threads.
  absl::Status StartCollecting();
  bool collecting() const { return collecting_; }
  // Collecting could not start after the fork: the capture is left as it is
  // (the session's dump is off).
  void Abandon() { abandoned_ = true; }
  bool abandoned() const { return abandoned_; }

  const DumpRegion* region() const { return region_; }
  // What the capture says of itself (CaptureInfo), as made at Start.
  const v1::CaptureInfo& info() const { return info_; }
  DumpRecorder* recorder() const { return recorder_.get(); }
  const Collector& collector() const { return *collector_; }
  const ChosenSink& sink() const { return sink_; }

  // How the device ended, for the capture.
  struct Ending {
    const DeviceCrashAnalysis* crash = nullptr;  // it died or hung
    bool hang = false;                           // the host's watch killed it
    uint32_t steps_begun = 0;
  };
  // The dump's end; `labels` gets those known only now ("steps"), the first
  // failure goes to `dump_status` (unless it holds one), counts to `report`,
  // refused-record folders and wrote_capture to `result`.
  void Finish(const Ending& ending, CaptureLabels* labels, SessionReport* report,
              SessionResult* result, absl::Status* dump_status);

  // Where the capture can be read back once finished (`wrote_capture`: a
  // local one holds records): the service's capture whenever it streamed.
  CaptureReadback Readback(bool wrote_capture) const;
  // Where the capture went, into `result`: its local folder (also when the
  // service lost it and the local folder took the rest), else the
  // service's capture.
  void Locate(const SessionReport& report, SessionResult* result) const;

  // Streaming: each exception dump of `result` also goes to the service, as
  // a capture of its own (it stays in its folder too). `crash` (a crash,
  // not a hang) goes in as the crash dump's device_crash.
  void UploadExceptionDumps(const CaptureLabels& labels, const v1::DeviceCrash* crash,
                            SessionResult* result);

 private:
  // The capture's description from the session.
  void Describe(int level);
  absl::Status MakeSink();
  // Finish for a device that never ran: an empty capture.
  void FinishUncollected(SessionResult* result, absl::Status* dump_status);
  // What is known only at the end, into the sink before the manifest.
  absl::Status Amend(const Ending& ending, CaptureLabels* labels, const SessionReport& report);
  // The streamed capture the service lost, said as a WARNING.
  void AccountKeptLocally(SessionReport* report);

  Context c_;
  std::unique_ptr<RefusedRecordDump> refused_records_;  // outlives the collector
  std::unique_ptr<Collector> collector_;
  const DumpRegion* region_ = nullptr;
  bool region_failed_ = false;
  std::unique_ptr<DumpRecorder> recorder_;
  v1::CaptureInfo info_;
  ChosenSink sink_;
  bool collecting_ = false;
  bool abandoned_ = false;
};

// The capture's kernel table (CaptureInfo.kernels) from the session's
// kernels. A kernel the table cannot hold (format/kernel_table.h: a name
// or type too long, not UTF-8, with a control character; past the table's
// size) is left out with a WARNING: its records keep their func id.
void FillKernelTable(const KernelRegistry& kernels, v1::CaptureInfo* info,
                     const std::function<void(const std::string&)>& warn);

}  // namespace argsdump

#endif  // ARGSDUMP_SDK_SESSION_CAPTURE_H_
