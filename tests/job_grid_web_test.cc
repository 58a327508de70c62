// The web page's job view in a real browser: a capture_server (in this
// process) with its HTTP face on 127.0.0.1 port 0, a job of 4 ranks x 3
// steps streamed through the real ingest path (client/ IngestWriter with
// the rank's JobMember) with a NaN planted on rank 2 at step 1, and
// Debian's headless Chromium (tools/setup.sh installs it) reading back the
// rendered DOM (--dump-dom): the grid's rows and cells, its NaN marker, the
// first non-finite answer, and where a cell's link leads (the rank's
// capture with its step filter, loaded in turn).
#include <sys/wait.h>

#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "client/capture_client.h"
#include "gtest/gtest.h"
#include "server/capture_service.h"
#include "tests/testing/arg_records.h"
#include "tests/testing/record_batch.h"
#include "tests/testing/headless_chromium.h"
#include "tests/testing/temp_dir.h"

namespace argsdump {
namespace {

constexpr uint32_t kRanks = 4;
constexpr uint32_t kSteps = 3;
constexpr uint32_t kTasksPerStep = 2;
constexpr uint32_t kNanRank = 2;
constexpr uint32_t kNanStep = 1;

// A rank's records: per step, per task, an input and an output tensor;
// the output of the step's first task holds a NaN when `nan_step` is it.
RecordBatch RankRecords(std::optional<uint32_t> nan_step) {
  RecordBatch batch;
  for (uint32_t s = 0; s < kSteps; ++s) {
    for (uint32_t t = 0; t < kTasksPerStep; ++t) {
      const uint64_t task = 0x100 * (s + 1) + t;
      batch.Add(TensorRecord(task).FuncIds({1}).Step(s).Shape({2}), BytesOf(std::vector<float>{1, 2}));
      std::vector<float> out = {3, 4};
      const bool nan = nan_step == s && t == 0;
      if (nan) out[1] = std::numeric_limits<float>::quiet_NaN();
      v1::ArgRecord& r = batch.Add(TensorRecord(task)
                                       .FuncIds({1})
                                       .Step(s)
                                       .Arg(1)
                                       .Role(v1::ROLE_OUTPUT)
                                       .Stage(v1::STAGE_AFTER_COMPLETION)
                                       .Shape({2}),
                                   BytesOf(out));
      if (nan) r.set_nonfinite(true);
    }
  }
  return batch;
}

// The job grid's rows in a DOM dump: rank -> its cells' (step, NaN marker).
std::map<uint32_t, std::vector<std::pair<std::string, std::string>>> GridRows(
    const std::string& dom) {
  std::map<uint32_t, std::vector<std::pair<std::string, std::string>>> rows;
  const size_t table = dom.find("id=\"job-grid-table\"");
  if (table == std::string::npos) return rows;
  const size_t end = dom.find("</table>", table);
  const std::string grid = dom.substr(table, end - table);
  const std::regex row("<tr[^>]*data-rank=\"([0-9]+)\"[^>]*>([\\s\\S]*?)</tr>");
  const std::regex cell("<td class=\"cell[^\"]*\" data-step=\"([0-9]+)\" data-nan=\"(true|false)\"");
  for (auto it = std::sregex_iterator(grid.begin(), grid.end(), row); it != std::sregex_iterator();
       ++it) {
    auto& cells = rows[static_cast<uint32_t>(std::stoul((*it)[1].str()))];
    const std::string body = (*it)[2].str();
    for (auto c = std::sregex_iterator(body.begin(), body.end(), cell);
         c != std::sregex_iterator(); ++c) {
      cells.emplace_back((*c)[1].str(), (*c)[2].str());
    }
  }
  return rows;
}

// An attribute's value as the page set it (a DOM dump escapes '&').
std::string Unescape(std::string text) {
  for (size_t at; (at = text.find("&amp;")) != std::string::npos;) text.replace(at, 5, "&");
  return text;
}

// Whether the element with id `id` carries the hidden attribute.
bool Hidden(const std::string& dom, const std::string& id) {
  const std::regex tag("<[a-z]+[^>]*\\bid=\"" + id + "\"[^>]*>");
  std::smatch m;
  return std::regex_search(dom, m, tag) && std::regex_search(m.str(), std::regex("\\shidden\\b"));
}

class JobGridWebTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir("job_grid_web");
    o.http.listen = "127.0.0.1:0";
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    CaptureClientOptions c;
    c.target = absl::StrCat("127.0.0.1:", server_->port());
    auto client = CaptureClient::Create(c);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    for (uint32_t rank = 0; rank < kRanks; ++rank) Rank(rank);
    base_ = absl::StrCat("http://127.0.0.1:", server_->http_port(), "/");
  }

  void TearDown() override {
    client_.reset();
    if (server_ != nullptr) server_->Shutdown(std::chrono::milliseconds(500));
  }

  void Rank(uint32_t rank) {
    IngestWriterOptions o;
    o.open.set_capture(absl::StrCat("train.rank", rank));
    o.open.set_level(v1::DUMP_LEVEL_FULL);
    v1::JobMember* m = o.open.mutable_job();
    m->set_job("train");
    m->set_rank(rank);
    m->set_world_size(kRanks);
    m->set_source("flag");
    v1::Kernel* k = o.open.add_kernels();
    k->set_func_id(1);
    k->set_name("add");
    const RecordBatch batch =
        RankRecords(rank == kNanRank ? std::optional<uint32_t>(kNanStep) : std::nullopt);
    auto writer = IngestWriter::Open(client_.get(), o);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Send(batch.RecordPtrs(), batch.PayloadViews(), 0, 0));
    ASSERT_TRUE((*writer)->WaitAcked(batch.size()));
    v1::CaptureSummary summary;
    ASSERT_TRUE((*writer)->Finish(v1::IngestFinish(), &summary).ok());
  }

  std::unique_ptr<CaptureServer> server_;
  std::unique_ptr<CaptureClient> client_;
  std::string base_;
};

TEST_F(JobGridWebTest, TheGridMarksTheNanCellAndACellOpensItsRankAtItsStep) {
  const std::string dom = RunChromium(base_ + "#job=train", "--dump-dom");
  ASSERT_FALSE(dom.empty());
  // The jobs list names the job; the job view is shown.
  EXPECT_NE(dom.find("data-job=\"train\""), std::string::npos) << dom.substr(0, 3000);
  EXPECT_FALSE(Hidden(dom, "job-pane"));
  // 4 rows x 3 step columns, the NaN marker on rank 2 step 1 only.
  const auto rows = GridRows(dom);
  ASSERT_EQ(rows.size(), kRanks) << dom.substr(0, 6000);
  for (const auto& [rank, cells] : rows) {
    ASSERT_EQ(cells.size(), kSteps) << "rank " << rank;
    for (uint32_t s = 0; s < kSteps; ++s) {
      EXPECT_EQ(cells[s].first, std::to_string(s));
      EXPECT_EQ(cells[s].second, rank == kNanRank && s == kNanStep ? "true" : "false")
          << "rank " << rank << " step " << s;
    }
  }
  // The first non-finite answer names rank 2 and links to its record.
  std::smatch m;
  const std::regex first(
      "id=\"job-first-nonfinite\" data-rank=\"([0-9]+)\"><a href=\"([^\"]*)\">([^<]*)<");
  ASSERT_TRUE(std::regex_search(dom, m, first)) << dom.substr(0, 6000);
  EXPECT_EQ(m[1].str(), "2");
  EXPECT_EQ(Unescape(m[2].str()).rfind("#capture=train.rank2&record=", 0), 0u) << m[2].str();
  EXPECT_EQ(m[3].str().rfind("rank 2, step 1,", 0), 0u) << m[3].str();
  // The cell's link: rank 2's capture with the step filter; loading it
  // shows that capture's records of step 1 only.
  const std::regex link("data-rank=\"2\" data-capture=\"train.rank2\">[\\s\\S]*?"
                        "data-step=\"1\"[^>]*><a href=\"([^\"]*)\"");
  ASSERT_TRUE(std::regex_search(dom, m, link));
  const std::string hash = Unescape(m[1].str());
  EXPECT_EQ(hash, "#capture=train.rank2&step=1");
  const std::string capture = RunChromium(base_ + hash, "--dump-dom");
  EXPECT_NE(capture.find("id=\"args-capture\" class=\"mono\">train.rank2<"), std::string::npos)
      << capture.substr(0, 3000);
  const std::regex step_cell("<tr[^>]*data-record-id=\"[0-9]+\"[^>]*>[\\s\\S]*?</tr>");
  int records = 0;
  for (auto it = std::sregex_iterator(capture.begin(), capture.end(), step_cell);
       it != std::sregex_iterator(); ++it) {
    ++records;
  }
  EXPECT_EQ(records, static_cast<int>(2 * kTasksPerStep)) << capture.substr(0, 6000);
  EXPECT_TRUE(Hidden(capture, "job-pane"));
}

}  // namespace
}  // namespace argsdump
