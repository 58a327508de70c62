// The S3 XML reader on what stores send (Ceph RGW's and AWS's spellings) and
// on hostile documents: each refused with a message naming the byte, none
// crashing or growing without bound.
#include "s3/s3_xml.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace argsdump::s3 {
namespace {

// As Ceph RGW 16 answers ListObjectsV2 (one line, xmlns, Owner blocks).
constexpr char kRgwListing[] =
    R"(<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix>p/</Prefix><MaxKeys>2</MaxKeys><IsTruncated>true</IsTruncated><Contents><Key>p/a&amp;b &lt;1&gt;</Key><LastModified>2026-12-05T22:00:00.000Z</LastModified><ETag>&quot;9e107d9d372bb6826bd81d3542a419d6&quot;</ETag><Size>43</Size><StorageClass>STANDARD</StorageClass><Owner><ID>test</ID><DisplayName>test</DisplayName></Owner><Type>Normal</Type></Contents><Contents><Key>p/&#x1234;&#65;</Key><LastModified>2026-12-05T22:00:01.000Z</LastModified><ETag>"x-3"</ETag><Size>18446744073709551615</Size></Contents><CommonPrefixes><Prefix>p/sub/</Prefix></CommonPrefixes><KeyCount>2</KeyCount><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken></ListBucketResult>)";

TEST(S3XmlTest, ListObjectsV2AsRgwSendsIt) {
  auto page = ParseListObjectsV2(kRgwListing);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a&b <1>");
  EXPECT_EQ(page->objects[0].size, 43u);
  EXPECT_EQ(page->objects[0].etag, "\"9e107d9d372bb6826bd81d3542a419d6\"");
  EXPECT_EQ(page->objects[0].last_modified, "2026-12-05T22:00:00.000Z");
  EXPECT_EQ(page->objects[1].key, "p/\xE1\x88\xB4" "A");
  EXPECT_EQ(page->objects[1].size, 18446744073709551615ull);
  ASSERT_EQ(page->common_prefixes.size(), 1u);
  EXPECT_EQ(page->common_prefixes[0], "p/sub/");
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(S3XmlTest, PrettyPrintedEmptyListingWithCommentsAndCdata) {
  auto page = ParseListObjectsV2(
      "<?xml version='1.0'?>\n<!-- a comment -->\n<s3:ListBucketResult xmlns:s3='x'>\n"
      "  <s3:IsTruncated>false</s3:IsTruncated>\n  <s3:Name><![CDATA[b<k>t]]></s3:Name>\n"
      "</s3:ListBucketResult>\n");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->is_truncated);
}

TEST(S3XmlTest, MultipartDocuments) {
  auto id = ParseInitiateMultipartUpload(
      R"(<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><Key>k</Key><UploadId>2~abc</UploadId></InitiateMultipartUploadResult>)");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "2~abc");

  // RGW 16's empty ETag is an answer, not an error.
  auto done = ParseCompleteMultipartUpload(
      R"(<CompleteMultipartUploadResult><Location>l</Location><Bucket>b</Bucket><Key>k</Key><ETag></ETag></CompleteMultipartUploadResult>)");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(done->failed);
  EXPECT_EQ(done->etag, "");

  auto failed = ParseCompleteMultipartUpload(
      "<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>");
  ASSERT_TRUE(failed.ok());
  EXPECT_TRUE(failed->failed);
  EXPECT_EQ(failed->error.code, "InternalError");

  auto uploads = ParseListMultipartUploads(
      R"(<ListMultipartUploadsResult><Bucket>b</Bucket><IsTruncated>true</IsTruncated><NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker><Upload><Key>k1</Key><UploadId>u1</UploadId><Initiated>2026-12-05T21:00:00.000Z</Initiated></Upload><Upload><Key>k2</Key><UploadId>u2</UploadId><Initiated>2026-12-05T21:00:01.000Z</Initiated></Upload></ListMultipartUploadsResult>)");
  ASSERT_TRUE(uploads.ok()) << uploads.status();
  ASSERT_EQ(uploads->uploads.size(), 2u);
  EXPECT_EQ(uploads->uploads[1].upload_id, "u2");
  EXPECT_EQ(uploads->uploads[0].initiated, "2026-12-05T21:00:00.000Z");
  EXPECT_EQ(uploads->next_key_marker, "k2");

  auto copy = ParseCopyResult(R"(<CopyPartResult><LastModified>t</LastModified><ETag>"e"</ETag></CopyPartResult>)");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->etag, "\"e\"");
  EXPECT_FALSE(ParseCopyResult("<CopyPartResult></CopyPartResult>").ok());
}

TEST(S3XmlTest, ErrorDocumentIsCutAndPrintable) {
  auto error = ParseError(absl::StrCat("<Error><Code>SignatureDoesNotMatch</Code><Message>",
                                       std::string(1000, 'm'), "&#x9;</Message><RequestId>r</RequestId></Error>"));
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_EQ(error->code, "SignatureDoesNotMatch");
  EXPECT_LE(error->message.size(), 203u);
  EXPECT_EQ(error->request_id, "r");
  EXPECT_EQ(Printable("a\x01\xff" "b"), "a??b");
}

void ExpectRefused(const std::string& doc, const std::string& why) {
  auto parsed = ParseXml(doc);
  ASSERT_FALSE(parsed.ok()) << "accepted: " << doc.substr(0, 80);
  EXPECT_TRUE(absl::StrContains(parsed.status().message(), why))
      << parsed.status() << " (wanted '" << why << "')";
  EXPECT_LE(parsed.status().message().size(), 200u);
}

TEST(S3XmlTest, HostileDocumentsAreRefused) {
  // Entity expansion ("billion laughs") never starts: no DOCTYPE at all.
  ExpectRefused(R"(<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><a>&lol2;</a>)",
                "DOCTYPE");
  ExpectRefused("<a>&lol;</a>", "unknown entity");
  ExpectRefused("<a>&amp</a>", "unterminated entity");
  ExpectRefused("<a>&#0;</a>", "invalid character");
  ExpectRefused("<a>&#xD800;</a>", "invalid character");
  ExpectRefused("<a>&#x110000;</a>", "out of range");
  ExpectRefused("<a>&#x;</a>", "bad character reference");
  ExpectRefused("<a>&#12a;</a>", "bad character reference");
  // Depth: a million opening tags end at the limit, with no recursion.
  std::string deep;
  for (int i = 0; i < 1000000; ++i) deep += "<a>";
  ExpectRefused(deep, "nested too deep");
  // Element count.
  std::string wide = "<r>";
  for (int i = 0; i < 300000; ++i) wide += "<a/>";
  wide += "</r>";
  ExpectRefused(wide, "too many elements");
  // Text size, and document size.
  ExpectRefused("<a>" + std::string(100 << 10, 'x') + "</a>", "text over the limit");
  EXPECT_FALSE(ParseXml(std::string(17 << 20, ' ')).ok());
  // Structure.
  ExpectRefused("", "no root element");
  ExpectRefused("   ", "no root element");
  ExpectRefused("<a><b></a></b>", "does not match");
  ExpectRefused("<a></a><b></b>", "second root");
  ExpectRefused("<a>", "ends inside an element");
  ExpectRefused("<a", "unterminated start tag");
  ExpectRefused("<a x></a>", "expected '='");
  ExpectRefused("<a x=y></a>", "quoted attribute");
  ExpectRefused("<a x='<'></a>", "'<' in an attribute");
  ExpectRefused("<a x='1'y='2'></a>", "blank before an attribute");
  ExpectRefused("junk<a/>", "text outside the root");
  ExpectRefused("<a/>junk", "text outside the root");
  ExpectRefused("<1a/>", "expected a name");
  ExpectRefused("<a><!-- never closed</a>", "unterminated comment");
  ExpectRefused("<a><![CDATA[ never closed</a>", "unterminated CDATA");
  ExpectRefused("<?xml never closed", "unterminated processing instruction");
  ExpectRefused("<a></a  x>", "unterminated end tag");
  ExpectRefused("\x00\x01\x02", "no root element");
}

TEST(S3XmlTest, ListingsThatWouldLoopOrLieAreRefused) {
  // Truncated without a token: a client following it would loop forever.
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>").ok());
  EXPECT_FALSE(ParseListMultipartUploads(
                   "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated></ListMultipartUploadsResult>")
                   .ok());
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>").ok());
  for (const char* size : {"-1", "", " 1", "1 ", "18446744073709551616", "0x10", "1e3"}) {
    SCOPED_TRACE(size);
    EXPECT_FALSE(ParseListObjectsV2(absl::StrCat("<ListBucketResult><Contents><Key>k</Key><Size>", size,
                                                 "</Size></Contents></ListBucketResult>"))
                     .ok());
  }
  EXPECT_FALSE(ParseListObjectsV2("<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>").ok());
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>NoSuchBucket</Code></Error>").ok());
  EXPECT_FALSE(ParseInitiateMultipartUpload("<InitiateMultipartUploadResult/>").ok());
  EXPECT_FALSE(ParseListMultipartUploads(
                   "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload></ListMultipartUploadsResult>")
                   .ok());
}

}  // namespace
}  // namespace argsdump::s3
