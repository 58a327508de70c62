#include "s3/s3_xml.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace argsdump::s3 {
namespace {

absl::Status Bad(std::string_view what, size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("S3 XML: ", std::string(what), " at byte ", at));
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool IsNameStart(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' || c >= 0x80;
}
bool IsNameChar(unsigned char c) {
  return IsNameStart(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool ValidXmlChar(uint32_t cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

// Decodes the entity starting at doc[*pos] == '&' into *out; *pos ends
// after the ';'.
absl::Status DecodeEntity(std::string_view doc, size_t* pos, std::string* out) {
  const size_t start = *pos;
  const size_t semi = doc.find(';', start);
  if (semi == std::string_view::npos || semi - start > 12) return Bad("unterminated entity", start);
  const std::string_view name = doc.substr(start + 1, semi - start - 1);
  *pos = semi + 1;
  if (name == "amp") return out->push_back('&'), absl::OkStatus();
  if (name == "lt") return out->push_back('<'), absl::OkStatus();
  if (name == "gt") return out->push_back('>'), absl::OkStatus();
  if (name == "quot") return out->push_back('"'), absl::OkStatus();
  if (name == "apos") return out->push_back('\''), absl::OkStatus();
  if (name.size() >= 2 && name[0] == '#') {
    uint32_t cp = 0;
    const bool hex = name[1] == 'x';
    const std::string_view digits = name.substr(hex ? 2 : 1);
    if (digits.empty() || digits.size() > 8) return Bad("bad character reference", start);
    for (char c : digits) {
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (hex && c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (hex && c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return Bad("bad character reference", start);
      }
      cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
      if (cp > 0x10FFFF) return Bad("character reference out of range", start);
    }
    if (!ValidXmlChar(cp)) return Bad("character reference to an invalid character", start);
    AppendUtf8(cp, out);
    return absl::OkStatus();
  }
  return Bad("unknown entity", start);
}

std::string_view LocalName(std::string_view qualified) {
  const size_t colon = qualified.rfind(':');
  return colon == std::string_view::npos ? qualified : qualified.substr(colon + 1);
}

// Skips "<?...?>" or "<!--...-->" at *pos; false if neither is there.
absl::StatusOr<bool> SkipMarkup(std::string_view doc, size_t* pos) {
  if (doc.compare(*pos, 2, "<?") == 0) {
    const size_t end = doc.find("?>", *pos + 2);
    if (end == std::string_view::npos) return Bad("unterminated processing instruction", *pos);
    *pos = end + 2;
    return true;
  }
  if (doc.compare(*pos, 4, "<!--") == 0) {
    const size_t end = doc.find("-->", *pos + 4);
    if (end == std::string_view::npos) return Bad("unterminated comment", *pos);
    *pos = end + 3;
    return true;
  }
  return false;
}

// A name at *pos (the qualified one); *pos ends after it.
absl::StatusOr<std::string_view> ReadName(std::string_view doc, size_t* pos) {
  const size_t start = *pos;
  if (start >= doc.size() || !IsNameStart(static_cast<unsigned char>(doc[start]))) {
    return Bad("expected a name", start);
  }
  size_t i = start + 1;
  while (i < doc.size() && IsNameChar(static_cast<unsigned char>(doc[i]))) ++i;
  if (i - start > 256) return Bad("name too long", start);
  *pos = i;
  return doc.substr(start, i - start);
}

struct Open {
  std::string_view qualified;
  XmlElement element;
};

// Parses a start tag at *pos ('<' then a name); *self_closing when "/>".
absl::Status ReadStartTag(std::string_view doc, size_t* pos, std::string_view* qualified,
                          bool* self_closing) {
  ++*pos;  // '<'
  auto name = ReadName(doc, pos);
  if (!name.ok()) return name.status();
  *qualified = *name;
  while (true) {
    const size_t before = *pos;
    while (*pos < doc.size() && IsSpace(doc[*pos])) ++*pos;
    if (*pos >= doc.size()) return Bad("unterminated start tag", before);
    if (doc[*pos] == '>') {
      ++*pos;
      *self_closing = false;
      return absl::OkStatus();
    }
    if (doc.compare(*pos, 2, "/>") == 0) {
      *pos += 2;
      *self_closing = true;
      return absl::OkStatus();
    }
    if (*pos == before) return Bad("expected a blank before an attribute", *pos);
    auto attribute = ReadName(doc, pos);
    if (!attribute.ok()) return attribute.status();
    while (*pos < doc.size() && IsSpace(doc[*pos])) ++*pos;
    if (*pos >= doc.size() || doc[*pos] != '=') return Bad("expected '='", *pos);
    ++*pos;
    while (*pos < doc.size() && IsSpace(doc[*pos])) ++*pos;
    if (*pos >= doc.size() || (doc[*pos] != '"' && doc[*pos] != '\'')) {
      return Bad("expected a quoted attribute value", *pos);
    }
    const char quote = doc[*pos];
    const size_t end = doc.find(quote, *pos + 1);
    if (end == std::string_view::npos) return Bad("unterminated attribute value", *pos);
    if (doc.substr(*pos + 1, end - *pos - 1).find('<') != std::string_view::npos) {
      return Bad("'<' in an attribute value", *pos);
    }
    *pos = end + 1;
  }
}

// Strict unsigned decimal (no sign, no blanks, fits 64 bits).
bool ParseU64(std::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *value = v;
  return true;
}

absl::StatusOr<bool> ParseBool(const XmlElement* e, std::string_view what) {
  if (e == nullptr) return false;
  if (e->text == "true") return true;
  if (e->text == "false") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("S3 XML: ", std::string(what), " is neither true nor false: '",
                   Printable(e->text, 40), "'"));
}

std::string TextOf(const XmlElement& parent, std::string_view name) {
  const XmlElement* e = parent.Child(name);
  return e == nullptr ? std::string() : e->text;
}

absl::Status RootIs(const XmlElement& root, std::string_view name) {
  if (root.name == name) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("S3 XML: expected <", std::string(name),
                                                 ">, got <", Printable(root.name, 60), ">"));
}

S3Error ErrorFrom(const XmlElement& root) {
  return S3Error{Printable(TextOf(root, "Code")), Printable(TextOf(root, "Message")),
                 Printable(TextOf(root, "RequestId"), 100)};
}

}  // namespace

const XmlElement* XmlElement::Child(std::string_view child_name) const {
  for (const XmlElement& c : children) {
    if (c.name == child_name) return &c;
  }
  return nullptr;
}

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (text.size() > max) out += "...";
  return out;
}

absl::StatusOr<XmlElement> ParseXml(std::string_view doc, const XmlLimits& limits) {
  if (doc.size() > limits.max_document_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("S3 XML: document of ", doc.size(),
                                                   " bytes is over the limit of ",
                                                   limits.max_document_bytes));
  }
  size_t pos = 0;
  if (doc.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  std::vector<Open> stack;
  size_t elements = 0;
  bool have_root = false;
  XmlElement root;
  while (pos < doc.size()) {
    const char c = doc[pos];
    if (c != '<') {
      // Character data.
      const size_t start = pos;
      std::string* text = stack.empty() ? nullptr : &stack.back().element.text;
      while (pos < doc.size() && doc[pos] != '<') {
        if (doc[pos] == '&') {
          if (text == nullptr) return Bad("entity outside the root element", pos);
          if (absl::Status s = DecodeEntity(doc, &pos, text); !s.ok()) return s;
        } else {
          if (text == nullptr) {
            if (!IsSpace(doc[pos])) return Bad("text outside the root element", pos);
          } else {
            text->push_back(doc[pos]);
          }
          ++pos;
        }
        if (text != nullptr && text->size() > limits.max_text_bytes) {
          return Bad("text over the limit", start);
        }
      }
      continue;
    }
    auto skipped = SkipMarkup(doc, &pos);
    if (!skipped.ok()) return skipped.status();
    if (*skipped) continue;
    if (doc.compare(pos, 9, "<![CDATA[") == 0) {
      if (stack.empty()) return Bad("CDATA outside the root element", pos);
      const size_t end = doc.find("]]>", pos + 9);
      if (end == std::string_view::npos) return Bad("unterminated CDATA", pos);
      std::string& text = stack.back().element.text;
      text.append(doc.substr(pos + 9, end - pos - 9));
      if (text.size() > limits.max_text_bytes) return Bad("text over the limit", pos);
      pos = end + 3;
      continue;
    }
    if (doc.compare(pos, 2, "<!") == 0) return Bad("DOCTYPE or declaration refused", pos);
    if (doc.compare(pos, 2, "</") == 0) {
      const size_t tag = pos;
      pos += 2;
      auto name = ReadName(doc, &pos);
      if (!name.ok()) return name.status();
      while (pos < doc.size() && IsSpace(doc[pos])) ++pos;
      if (pos >= doc.size() || doc[pos] != '>') return Bad("unterminated end tag", tag);
      ++pos;
      if (stack.empty() || stack.back().qualified != *name) {
        return Bad("end tag does not match the open element", tag);
      }
      XmlElement done = std::move(stack.back().element);
      stack.pop_back();
      if (stack.empty()) {
        root = std::move(done);
        have_root = true;
      } else {
        stack.back().element.children.push_back(std::move(done));
      }
      continue;
    }
    // A start tag.
    if (have_root) return Bad("a second root element", pos);
    const size_t tag = pos;
    std::string_view qualified;
    bool self_closing = false;
    if (absl::Status s = ReadStartTag(doc, &pos, &qualified, &self_closing); !s.ok()) return s;
    if (++elements > limits.max_elements) return Bad("too many elements", tag);
    if (static_cast<int>(stack.size()) + 1 > limits.max_depth) return Bad("nested too deep", tag);
    XmlElement element;
    element.name = std::string(LocalName(qualified));
    if (self_closing) {
      if (stack.empty()) {
        root = std::move(element);
        have_root = true;
      } else {
        stack.back().element.children.push_back(std::move(element));
      }
    } else {
      stack.push_back(Open{qualified, std::move(element)});
    }
  }
  if (!stack.empty()) return Bad("document ends inside an element", doc.size());
  if (!have_root) return Bad("no root element", doc.size());
  return root;
}

absl::StatusOr<ListObjectsPage> ParseListObjectsV2(std::string_view document) {
  auto root = ParseXml(document);
  if (!root.ok()) return root.status();
  if (absl::Status s = RootIs(*root, "ListBucketResult"); !s.ok()) return s;
  ListObjectsPage page;
  for (const XmlElement& child : root->children) {
    if (child.name == "Contents") {
      ObjectEntry entry;
      entry.key = TextOf(child, "Key");
      if (entry.key.empty()) return absl::InvalidArgumentError("S3 XML: <Contents> without a <Key>");
      const XmlElement* size = child.Child("Size");
      if (size == nullptr || !ParseU64(size->text, &entry.size)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "S3 XML: <Contents> of '", Printable(entry.key, 100), "' without a valid <Size>"));
      }
      entry.etag = TextOf(child, "ETag");
      entry.last_modified = TextOf(child, "LastModified");
      page.objects.push_back(std::move(entry));
    } else if (child.name == "CommonPrefixes") {
      page.common_prefixes.push_back(TextOf(child, "Prefix"));
    }
  }
  auto truncated = ParseBool(root->Child("IsTruncated"), "IsTruncated");
  if (!truncated.ok()) return truncated.status();
  page.is_truncated = *truncated;
  page.next_continuation_token = TextOf(*root, "NextContinuationToken");
  if (page.is_truncated && page.next_continuation_token.empty()) {
    return absl::InvalidArgumentError(
        "S3 XML: a truncated listing without a NextContinuationToken");
  }
  return page;
}

absl::StatusOr<ListUploadsPage> ParseListMultipartUploads(std::string_view document) {
  auto root = ParseXml(document);
  if (!root.ok()) return root.status();
  if (absl::Status s = RootIs(*root, "ListMultipartUploadsResult"); !s.ok()) return s;
  ListUploadsPage page;
  for (const XmlElement& child : root->children) {
    if (child.name != "Upload") continue;
    UploadEntry entry{TextOf(child, "Key"), TextOf(child, "UploadId"), TextOf(child, "Initiated")};
    if (entry.key.empty() || entry.upload_id.empty()) {
      return absl::InvalidArgumentError("S3 XML: <Upload> without a <Key> or an <UploadId>");
    }
    page.uploads.push_back(std::move(entry));
  }
  auto truncated = ParseBool(root->Child("IsTruncated"), "IsTruncated");
  if (!truncated.ok()) return truncated.status();
  page.is_truncated = *truncated;
  page.next_key_marker = TextOf(*root, "NextKeyMarker");
  page.next_upload_id_marker = TextOf(*root, "NextUploadIdMarker");
  if (page.is_truncated && page.next_key_marker.empty() && page.next_upload_id_marker.empty()) {
    return absl::InvalidArgumentError("S3 XML: a truncated upload listing without markers");
  }
  return page;
}

absl::StatusOr<std::string> ParseInitiateMultipartUpload(std::string_view document) {
  auto root = ParseXml(document);
  if (!root.ok()) return root.status();
  if (absl::Status s = RootIs(*root, "InitiateMultipartUploadResult"); !s.ok()) return s;
  std::string id = TextOf(*root, "UploadId");
  if (id.empty()) return absl::InvalidArgumentError("S3 XML: no <UploadId>");
  return id;
}

absl::StatusOr<S3Error> ParseError(std::string_view document) {
  auto root = ParseXml(document);
  if (!root.ok()) return root.status();
  if (absl::Status s = RootIs(*root, "Error"); !s.ok()) return s;
  return ErrorFrom(*root);
}

namespace {
absl::StatusOr<ResultOrError> ParseResultOrError(std::string_view document,
                                                 std::string_view root_name,
                                                 std::string_view alt_root_name,
                                                 bool etag_required) {
  auto root = ParseXml(document);
  if (!root.ok()) return root.status();
  ResultOrError out;
  if (root->name == "Error") {
    out.failed = true;
    out.error = ErrorFrom(*root);
    return out;
  }
  if (root->name != alt_root_name) {
    if (absl::Status s = RootIs(*root, root_name); !s.ok()) return s;
  }
  out.etag = TextOf(*root, "ETag");
  if (etag_required && out.etag.empty()) return absl::InvalidArgumentError("S3 XML: no <ETag>");
  return out;
}
}  // namespace

absl::StatusOr<ResultOrError> ParseCompleteMultipartUpload(std::string_view document) {
  return ParseResultOrError(document, "CompleteMultipartUploadResult",
                            "CompleteMultipartUploadResult", false);
}

absl::StatusOr<ResultOrError> ParseCopyResult(std::string_view document) {
  return ParseResultOrError(document, "CopyPartResult", "CopyObjectResult", true);
}

}  // namespace argsdump::s3
