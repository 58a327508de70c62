// A small, strict, bounded reader of the XML documents an S3 store answers
// with (ListBucketResult, ListMultipartUploadsResult, the multipart results,
// Error). Every byte comes from the network: the document, its depth, its
// element count and every text are bounded; a DOCTYPE (entity definitions)
// is refused; entities are the five predefined ones and character references
// to valid code points. Anything else is an InvalidArgument naming the byte.
#ifndef ARGSDUMP_S3_S3_XML_H_
#define ARGSDUMP_S3_S3_XML_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argsdump::s3 {

struct XmlLimits {
  size_t max_document_bytes = 16 << 20;
  int max_depth = 16;
  size_t max_elements = 200000;
  size_t max_text_bytes = 64 << 10;  // one element's text
};

// One element: its local name (any "prefix:" dropped), its text (the
// character data directly inside it, entities decoded) and its children.
struct XmlElement {
  std::string name;
  std::string text;
  std::vector<XmlElement> children;

  // The first child named `name`, or nullptr.
  const XmlElement* Child(std::string_view child_name) const;
};

// The document's root element. Attributes are checked for form and dropped
// (S3 answers carry only xmlns there).
absl::StatusOr<XmlElement> ParseXml(std::string_view document, const XmlLimits& limits = {});

// ListObjectsV2 (ListBucketResult).
struct ObjectEntry {
  std::string key;
  uint64_t size = 0;
  std::string etag;           // as sent, quotes included
  std::string last_modified;  // ISO 8601 as sent
};
struct ListObjectsPage {
  std::vector<ObjectEntry> objects;
  std::vector<std::string> common_prefixes;
  bool is_truncated = false;
  std::string next_continuation_token;  // "" when not truncated
};
absl::StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view document);

// ListMultipartUploadsResult.
struct UploadEntry {
  std::string key;
  std::string upload_id;
  std::string initiated;  // ISO 8601 as sent
};
struct ListUploadsPage {
  std::vector<UploadEntry> uploads;
  bool is_truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
};
absl::StatusOr<ListUploadsPage> ParseListMultipartUploads(std::string_view document);

// InitiateMultipartUploadResult: the upload id (never empty).
absl::StatusOr<std::string> ParseInitiateMultipartUpload(std::string_view document);

// <Error><Code/><Message/>...</Error>. Code and message are cut to 200
// printable bytes each (they go into messages).
struct S3Error {
  std::string code;
  std::string message;
  std::string request_id;
};
absl::StatusOr<S3Error> ParseError(std::string_view document);

// CompleteMultipartUploadResult, CopyPartResult, CopyObjectResult. A store
// may answer these 200 with an <Error> body (the failure came after the
// headers went out): `error` then holds it and the rest is empty. The ETag
// of a completed upload may be empty (Ceph RGW 16 sends <ETag></ETag>); a
// copy's ETag never is.
struct ResultOrError {
  std::string etag;
  bool failed = false;
  S3Error error;  // when failed
};
absl::StatusOr<ResultOrError> ParseCompleteMultipartUpload(std::string_view document);
absl::StatusOr<ResultOrError> ParseCopyResult(std::string_view document);

// Printable ASCII only, at most `max` bytes ('?' for anything else): what
// may go into a log line or a status message from the store's bytes.
std::string Printable(std::string_view text, size_t max = 200);

}  // namespace argsdump::s3

#endif  // ARGSDUMP_S3_S3_XML_H_
