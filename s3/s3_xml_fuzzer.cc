// libFuzzer target: any bytes as every S3 XML answer. Nothing may crash,
// hang or grow past the limits; a refusal's message stays short, and what
// the typed readers return respects their own promises.
//   bazel build --config=fuzz //s3:s3_xml_fuzzer   (tools/fuzz.sh)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "s3/s3_xml.h"

namespace {
void CheckMessage(const absl::Status& status) {
  if (!status.ok() && status.message().size() > 300) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view doc(reinterpret_cast<const char*>(data), size);
  using namespace argsdump::s3;
  CheckMessage(ParseXml(doc).status());
  auto listing = ParseListObjectsV2(doc);
  CheckMessage(listing.status());
  if (listing.ok()) {
    if (listing->is_truncated && listing->next_continuation_token.empty()) std::abort();
    for (const ObjectEntry& e : listing->objects) {
      if (e.key.empty()) std::abort();
    }
  }
  auto uploads = ParseListMultipartUploads(doc);
  CheckMessage(uploads.status());
  if (uploads.ok()) {
    for (const UploadEntry& u : uploads->uploads) {
      if (u.key.empty() || u.upload_id.empty()) std::abort();
    }
  }
  auto id = ParseInitiateMultipartUpload(doc);
  CheckMessage(id.status());
  if (id.ok() && id->empty()) std::abort();
  auto error = ParseError(doc);
  CheckMessage(error.status());
  if (error.ok() && (error->code.size() > 203 || error->message.size() > 203)) std::abort();
  CheckMessage(ParseCompleteMultipartUpload(doc).status());
  auto copy = ParseCopyResult(doc);
  CheckMessage(copy.status());
  if (copy.ok() && !copy->failed && copy->etag.empty()) std::abort();
  return 0;
}
