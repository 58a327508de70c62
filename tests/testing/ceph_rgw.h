// A real S3 store for tests: one Ceph cluster (mon + memstore OSD, no mgr)
// and one radosgw on 127.0.0.1 free ports, every file in a fresh folder
// under /tmp, booted by tools/ceph_rgw_up.sh (a few seconds). Invariant:
// every daemon it started is stopped by pid (SIGTERM, then SIGKILL after a
// grace) when the object goes, and a watchdog kills them if the test process
// dies first. Test-only.
#ifndef ARGSDUMP_TESTS_TESTING_CEPH_RGW_H_
#define ARGSDUMP_TESTS_TESTING_CEPH_RGW_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "s3/s3_client.h"
#include "tests/testing/child_process.h"

namespace argsdump {

class CephRgw {
 public:
  // Boots one. FailedPrecondition when Ceph is not installed (tools/setup.sh),
  // Internal with the script's last words when a stage failed.
  static absl::StatusOr<std::unique_ptr<CephRgw>> Start();
  ~CephRgw();
  CephRgw(const CephRgw&) = delete;
  CephRgw& operator=(const CephRgw&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // http://127.0.0.1:PORT
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  const std::string& region() const { return region_; }
  // The same gateway over TLS (https://localhost:PORT), its self-signed
  // certificate's file (the CA a client must trust).
  const std::string& tls_endpoint() const { return tls_endpoint_; }
  const std::string& ca_file() const { return ca_file_; }
  const std::string& dir() const { return dir_; }
  // A client's options for this gateway: its endpoint, region and keys.
  s3::S3ClientOptions ClientOptions() const;

  // Stops only radosgw (the S3 endpoint goes away; RADOS keeps the objects),
  // and starts it again on the same port, returning once S3 answers. For
  // tests of a store that disappears mid-work.
  absl::Status StopGateway();
  absl::Status StartGateway();

 private:
  CephRgw() = default;
  struct Daemon {
    pid_t pid = -1;
    int pidfd = -1;
    std::string name;
  };
  void StopAll();
  // A plain sh that waits for this process to end and SIGKILLs `pids`: the
  // daemons do not outlive a test that crashed.
  void Watch(const std::string& pids);

  std::string dir_;
  std::string endpoint_;
  std::string access_key_;
  std::string secret_key_;
  std::string region_;
  std::string tls_endpoint_;
  std::string ca_file_;
  std::vector<Daemon> daemons_;  // in stop order: rgw, osd, mon
  std::vector<std::unique_ptr<ChildProcess>> watchdogs_;
  std::unique_ptr<ChildProcess> restarted_gateway_;  // a radosgw StartGateway started
};

// The one RGW of this test binary, booted on first use and stopped at exit
// (its tests share it: use distinct buckets or key prefixes).
absl::StatusOr<CephRgw*> SharedCephRgw();

}  // namespace argsdump

#endif  // ARGSDUMP_TESTS_TESTING_CEPH_RGW_H_
