#!/usr/bin/env bash
# Installs what argsdump builds and tests with: Debian's Bazel 4.2.3
# (bazel-bootstrap) and the system gRPC / Protobuf / Abseil / GoogleTest /
# Google Benchmark packages. Idempotent: does nothing when all are present.
set -euo pipefail

packages=(
  bazel-bootstrap
  g++
  libgrpc++-dev
  protobuf-compiler-grpc
  libprotobuf-dev
  protobuf-compiler
  libabsl-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  grpc-proto
  openssl        # the TLS test makes a self-signed certificate
  valgrind       # tools/level0_overhead.sh
  zip            # Bazel 4's test-setup.sh zips test outputs with it (outputs.zip)
  zlib1g-dev     # the viewer reads those zips
  clang-14       # tools/fuzz.sh: libFuzzer targets (--config=fuzz)
  libclang-rt-14-dev
  libcpp-httplib-dev  # capture_server --http_listen (pulls libssl-dev, libbrotli-dev)
  chromium       # tests:web_view_test opens the web page in headless Chromium
  nodejs         # //server/http:web_modules_test runs the page's ES modules under node --test
  libcurl4-openssl-dev  # //s3: the S3 client's HTTP transport (libcurl over OpenSSL)
  libssl-dev     # //s3: SHA-256 / HMAC / MD5 of the SigV4 signer (libcrypto)
  # A real Ceph RGW (mon + memstore OSD + radosgw) that the S3 tests start
  # themselves on 127.0.0.1 (tools/ceph_rgw_up.sh). With --no-install-recommends
  # this pulls ~70 packages (~350 MB). Where /usr/sbin/policy-rc.d says
  # "exit 101" (containers) no daemon is started by the install; on a host
  # with systemd, stop/disable ceph.target afterwards (the tests use their
  # own ports and folders, so a running system Ceph is only noise).
  ceph-mon
  ceph-osd
  radosgw
  ceph-common    # radosgw-admin, monmaptool, python3-rados (pools made in one connection)
  uuid-runtime   # uuidgen for the cluster's fsid
  libpq-dev      # //catalog: the capture catalog's PostgreSQL client (libpq)
  postgresql-15  # catalog tests start a real PostgreSQL (initdb, postgres) in a temp dir
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
