// The web view in a real browser: a capture_server (in this process) with
// its HTTP face on 127.0.0.1 port 0, and Debian's headless Chromium
// (tools/setup.sh installs it) started by the test, one run per page load.
// The test reads the rendered DOM (--dump-dom) and a screenshot
// (--screenshot, a PNG decoded here) of the same page.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "proto/argsdump/v1/capture_service.grpc.pb.h"
#include "server/capture_service.h"
#include "server/http/http_test_capture.h"
#include "tests/testing/headless_chromium.h"
#include "tests/testing/temp_dir.h"
#include "zlib.h"

namespace argsdump {
namespace {

constexpr int kWidth = kChromiumWidth, kHeight = kChromiumHeight;
constexpr char kLongName[] = "MyKernelSuite.StridedAffineWithStartOffset-20261204-151500";

// The value of attribute `attr` on the element with id `id` in a DOM dump.
std::string Attribute(const std::string& dom, const std::string& id, const std::string& attr) {
  const std::regex tag("<[a-z]+[^>]*\\bid=\"" + id + "\"[^>]*>");
  std::smatch m;
  if (!std::regex_search(dom, m, tag)) return "";
  const std::string t = m.str();
  const std::regex value("\\b" + attr + "=\"([^\"]*)\"");
  std::smatch v;
  return std::regex_search(t, v, value) ? v[1].str() : "";
}

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // 3 bytes a pixel
  const uint8_t* at(int x, int y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

uint32_t BigEndian(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

// An 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes).
bool DecodePng(const std::string& file, Image* out) {
  const std::string& b = file;
  if (b.size() < 8 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return false;
  std::string idat;
  int channels = 0;
  for (size_t at = 8; at + 12 <= b.size();) {
    const auto* p = reinterpret_cast<const uint8_t*>(b.data() + at);
    const uint32_t length = BigEndian(p);
    const std::string type = b.substr(at + 4, 4);
    if (at + 12 + length > b.size()) return false;
    const std::string data = b.substr(at + 8, length);
    if (type == "IHDR") {
      const auto* h = reinterpret_cast<const uint8_t*>(data.data());
      out->width = static_cast<int>(BigEndian(h));
      out->height = static_cast<int>(BigEndian(h + 4));
      if (h[8] != 8 || h[12] != 0) return false;  // bit depth, interlace
      channels = h[9] == 2 ? 3 : h[9] == 6 ? 4 : 0;
      if (channels == 0) return false;
    } else if (type == "IDAT") {
      idat += data;
    }
    at += 12 + length;
  }
  const size_t stride = static_cast<size_t>(out->width) * channels;
  std::vector<uint8_t> raw((stride + 1) * out->height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(idat.data()),
                 idat.size()) != Z_OK ||
      raw_size != raw.size()) {
    return false;
  }
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  out->rgb.resize(static_cast<size_t>(out->width) * out->height * 3);
  for (int y = 0; y < out->height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* line = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? cur[i - channels] : 0;
      const int up = prev[i];
      const int c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = up; break;
        case 3: pred = (a + up) / 2; break;
        case 4: {
          const int pa = std::abs(up - c), pb = std::abs(a - c), pc = std::abs(a + up - 2 * c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? up : c;
          break;
        }
        default: return false;
      }
      cur[i] = static_cast<uint8_t>(line[i] + pred);
    }
    for (int x = 0; x < out->width; ++x) {
      std::memcpy(&out->rgb[(static_cast<size_t>(y) * out->width + x) * 3], &cur[x * channels], 3);
    }
    std::swap(prev, cur);
  }
  return true;
}

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};

// The text of the t-meta item with data-key="key" (its value span).
std::string MetaValue(const std::string& dom, const std::string& key) {
  const std::regex item("data-key=\"" + key +
                        "\"><span class=\"k\">[^<]*</span><span class=\"v[^\"]*\">([^<]*)<");
  std::smatch m;
  return std::regex_search(dom, m, item) ? m[1].str() : "";
}

bool ParseRect(const std::string& text, Rect* r) {
  return std::sscanf(text.c_str(), "%d,%d,%d,%d", &r->x, &r->y, &r->w, &r->h) == 4 && r->w > 0 &&
         r->h > 0;
}

class WebViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CaptureServerOptions o;
    o.listen = "127.0.0.1:0";
    o.hub.root = FreshTempDir("web_view");
    o.http.listen = "127.0.0.1:0";
    auto server = CaptureServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::CaptureService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), grpc::InsecureChannelCredentials()));
    base_ = absl::StrCat("http://127.0.0.1:", server_->http_port(), "/");
    const SceneRecords s = SceneCapture();
    SceneIngest done(stub_.get(), "scene");
    ASSERT_TRUE(done.Send(s, 0, s.records.size()));
    ASSERT_TRUE(done.Finish());
    const SceneRecords g = GeometryCapture();
    SceneIngest geometry(stub_.get(), "geometry");
    ASSERT_TRUE(geometry.Send(g, 0, g.records.size()));
    ASSERT_TRUE(geometry.Finish());
    // A name and labels as long as real ones (a test case's name and date).
    SceneIngest named(stub_.get(), kLongName, "",
                      {{"case", "StridedAffineWithStartOffset"}, {"host", "ci-runner-17"},
                       {"commit", "345e135"}, {"suite", "MyKernels"}});
    ASSERT_TRUE(named.Send(s, 0, 1));
    ASSERT_TRUE(named.Finish());
    // A live one, held open while the browser looks.
    live_ = std::make_unique<SceneIngest>(stub_.get(), "growing");
    ASSERT_TRUE(live_->Send(s, 0, 3));
  }

  void TearDown() override {
    live_.reset();
    if (server_ != nullptr) server_->Shutdown(std::chrono::milliseconds(500));
  }

  std::unique_ptr<CaptureServer> server_;
  std::unique_ptr<v1::CaptureService::Stub> stub_;
  std::unique_ptr<SceneIngest> live_;
  std::string base_;
};

TEST_F(WebViewTest, ListsCapturesFiltersByTaskAndDrawsAnInout) {
  const std::string dom = RunChromium(
      base_ + "#capture=scene&task_id=0x0000000100000001&record=2", "--dump-dom");
  ASSERT_FALSE(dom.empty());
  EXPECT_EQ(Attribute(dom, "status", "class").find("error"), std::string::npos);
  // Both captures, the live one as live.
  EXPECT_NE(dom.find("data-capture=\"scene\""), std::string::npos);
  EXPECT_NE(dom.find("data-capture=\"growing\""), std::string::npos);
  EXPECT_NE(dom.find("live"), std::string::npos);
  // The args table holds exactly the task's two records (the inout pair).
  const std::regex row("<tr[^>]*data-record-id=\"([0-9]+)\"[^>]*data-task-id=\"([^\"]+)\"");
  std::vector<std::string> ids;
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), row); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ((*it)[2].str(), "0x0000000100000001");
    ids.push_back((*it)[1].str());
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"2", "3"}));
  // The tensor view: heatmap, histogram and the before/after difference drawn.
  for (const char* canvas : {"heatmap", "histogram", "diff"}) {
    EXPECT_GT(std::atoi(Attribute(dom, canvas, "data-drawn").c_str()), 0) << canvas;
  }
  // after - before: the first 32 of 64 elements changed (by 1).
  const std::regex summary("id=\"diff-summary\"[^>]*>([^<]*)<");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, summary));
  EXPECT_NE(m[1].str().find("32 of 64"), std::string::npos) << m[1].str();
  const std::regex body_error("<body[^>]*data-error=\"([^\"]*)\"");
  if (std::regex_search(dom, m, body_error)) {
    EXPECT_EQ(m[1].str(), "");
  }
}

TEST_F(WebViewTest, TheHeatmapMarksNaNAndTheHistogramIsDrawn) {
  const std::string url = base_ + "#capture=scene&record=0";
  const std::string dom = RunChromium(url, "--dump-dom");
  Rect heat, hist;
  ASSERT_TRUE(ParseRect(Attribute(dom, "heatmap", "data-rect"), &heat)) << dom.substr(0, 2000);
  ASSERT_TRUE(ParseRect(Attribute(dom, "histogram", "data-rect"), &hist));
  const std::string png = FreshTempDir("shot") + "/page.png";
  RunChromium(url, "--screenshot=" + png);
  Image image;
  ASSERT_TRUE(DecodePng(ReadFileToString(png).value_or(""), &image)) << png;
  ASSERT_EQ(image.width, kWidth);
  ASSERT_EQ(image.height, kHeight);
  auto count = [&](const Rect& r, auto pixel_test) {
    int n = 0;
    for (int y = r.y; y < r.y + r.h && y < image.height; ++y) {
      for (int x = r.x; x < r.x + r.w && x < image.width; ++x) n += pixel_test(image.at(x, y));
    }
    return n;
  };
  auto not_white = [](const uint8_t* p) { return p[0] < 245 || p[1] < 245 || p[2] < 245; };
  auto magenta = [](const uint8_t* p) { return p[0] > 230 && p[1] < 30 && p[2] > 230; };
  const int heat_area = heat.w * heat.h;
  // A 16x32 tensor of sines: every cell coloured; the NaN cell magenta
  // (one of 512 cells: ~1/512 of the area).
  EXPECT_GT(count(heat, not_white), heat_area * 9 / 10) << "heatmap " << heat.x << "," << heat.y;
  const int nan_pixels = count(heat, magenta);
  EXPECT_GT(nan_pixels, heat_area / 1024) << "the NaN cell is not marked";
  EXPECT_LT(nan_pixels, heat_area / 128);
  EXPECT_GT(count(hist, not_white), hist.w * hist.h / 50) << "histogram";
}

// Record 0 of "geometry": a 3x4 view with strides (20, 2) from element 3.
// The header says its whole geometry, and the picture of the base fills
// exactly the 12 elements the view covers, the first one apart.
TEST_F(WebViewTest, TheRecordPaneShowsAStridedViewsGeometryAndWhatItCovers) {
  const std::string url = base_ + "#capture=geometry&record=0";
  const std::string dom = RunChromium(url, "--dump-dom");
  EXPECT_EQ(MetaValue(dom, "shape"), "3x4") << dom.substr(0, 3000);
  EXPECT_EQ(MetaValue(dom, "strides"), "(20, 2)");
  EXPECT_EQ(MetaValue(dom, "start_offset"), "3");
  EXPECT_EQ(MetaValue(dom, "contiguous"), "no");
  EXPECT_EQ(MetaValue(dom, "base"), "\u2265 50 elements (3\u202649)");
  EXPECT_EQ(dom.find("id=\"geometry\" hidden"), std::string::npos);
  // Rows of the second-last stride (20): 50 cells, 3 rows; 12 filled.
  EXPECT_EQ(Attribute(dom, "view-map", "data-cells"), "50");
  EXPECT_EQ(Attribute(dom, "view-map", "data-cols"), "20");
  EXPECT_EQ(Attribute(dom, "view-map", "data-covered"), "12");
  // Cells of 18 px (a 360 px picture), the last pixel of each the grid line.
  EXPECT_EQ(Attribute(dom, "view-map", "data-cell-px"), "18");
  constexpr int kCell = 18, kFill = (kCell - 1) * (kCell - 1);
  Rect map;
  ASSERT_TRUE(ParseRect(Attribute(dom, "view-map", "data-rect"), &map)) << dom.substr(0, 3000);
  EXPECT_EQ(map.w, 20 * kCell + 1);
  EXPECT_EQ(map.h, 3 * kCell + 1);

  const std::string png = FreshTempDir("geometry_shot") + "/page.png";
  RunChromium(url, "--screenshot=" + png);
  const std::string bytes = ReadFileToString(png).value_or("");
  ASSERT_GT(bytes.size(), 1000u);
  Image image;
  ASSERT_TRUE(DecodePng(bytes, &image)) << png;
  ASSERT_EQ(image.width, kWidth);
  ASSERT_EQ(image.height, kHeight);
  // Cell colours (style.css): in the view #2f6fb3, its first element
  // #e07b00, the rest of the base #f3f4f6.
  auto near = [](const uint8_t* p, int r, int g, int b) {
    return std::abs(p[0] - r) < 12 && std::abs(p[1] - g) < 12 && std::abs(p[2] - b) < 12;
  };
  int in = 0, start = 0, out = 0;
  for (int y = map.y; y < map.y + map.h && y < image.height; ++y) {
    for (int x = map.x; x < map.x + map.w && x < image.width; ++x) {
      const uint8_t* p = image.at(x, y);
      in += near(p, 0x2f, 0x6f, 0xb3);
      start += near(p, 0xe0, 0x7b, 0x00);
      out += near(p, 0xf3, 0xf4, 0xf6);
    }
  }
  EXPECT_EQ(start, kFill) << "the first element's cell";
  EXPECT_EQ(in, 11 * kFill) << "the view's other 11 elements";
  EXPECT_EQ(out, 38 * kFill) << "the base's 38 elements out of the view";
  // The filled cells are where the offsets are: offset 3 (row 0, column
  // 3) first, 5 in the view, 4 not; 23 (row 1, column 3) in the view.
  auto cell = [&](int offset) {
    return image.at(map.x + 1 + (offset % 20) * kCell + kCell / 2,
                    map.y + 1 + (offset / 20) * kCell + kCell / 2);
  };
  EXPECT_TRUE(near(cell(3), 0xe0, 0x7b, 0x00));
  EXPECT_TRUE(near(cell(5), 0x2f, 0x6f, 0xb3));
  EXPECT_TRUE(near(cell(4), 0xf3, 0xf4, 0xf6));
  EXPECT_TRUE(near(cell(23), 0x2f, 0x6f, 0xb3));
  EXPECT_TRUE(near(cell(49), 0x2f, 0x6f, 0xb3));
  EXPECT_TRUE(near(cell(48), 0xf3, 0xf4, 0xf6));
}

// A 2x3x4 view with strides (40, 10, 2) from element 5: its base in rows
// of 10, 24 of its 72 cells filled.
TEST_F(WebViewTest, AThreeDimensionalViewIsDrawnInRowsOfItsSecondLastStride) {
  const std::string dom = RunChromium(base_ + "#capture=geometry&record=1", "--dump-dom");
  EXPECT_EQ(MetaValue(dom, "strides"), "(40, 10, 2)") << dom.substr(0, 3000);
  EXPECT_EQ(MetaValue(dom, "start_offset"), "5");
  EXPECT_EQ(MetaValue(dom, "base"), "\u2265 72 elements (5\u202671)");
  EXPECT_EQ(Attribute(dom, "view-map", "data-cells"), "72");
  EXPECT_EQ(Attribute(dom, "view-map", "data-cols"), "10");
  EXPECT_EQ(Attribute(dom, "view-map", "data-covered"), "24");
}

// A base of a million elements is drawn a block of elements a cell, at
// most 4096 cells: a cell is filled when the view touches any element of
// it (computed here the same way); a view of more than 2^20 elements
// places its first 2^20 and says so.
TEST_F(WebViewTest, ALargeBaseIsDrawnInBoundedBlocks) {
  const std::string dom = RunChromium(base_ + "#capture=geometry&record=15", "--dump-dom");
  // 100 rows of 10 elements, 10000 apart: offsets 0..990009.
  const uint64_t extent = 99 * 10000 + 9 + 1;
  const uint64_t per_cell = (extent + 4095) / 4096;
  std::set<uint64_t> covered;
  for (uint64_t r = 0; r < 100; ++r) {
    for (uint64_t c = 0; c < 10; ++c) covered.insert((r * 10000 + c) / per_cell);
  }
  EXPECT_EQ(Attribute(dom, "view-map", "data-per-cell"), std::to_string(per_cell))
      << dom.substr(0, 3000);
  EXPECT_EQ(Attribute(dom, "view-map", "data-cells"),
            std::to_string((extent + per_cell - 1) / per_cell));
  EXPECT_EQ(Attribute(dom, "view-map", "data-cols"), "64");
  EXPECT_EQ(Attribute(dom, "view-map", "data-covered"), std::to_string(covered.size()));

  const std::string big = RunChromium(base_ + "#capture=geometry&record=16", "--dump-dom");
  EXPECT_LE(std::atoi(Attribute(big, "view-map", "data-cells").c_str()), 4096)
      << big.substr(0, 3000);
  const std::regex note("id=\"geometry-note\"[^>]*>([^<]*)<");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(big, m, note));
  EXPECT_NE(m[1].str().find("first 1048576 of 4194304 elements"), std::string::npos) << m[1].str();
}

// A contiguous view of a whole base has no picture (nothing to tell).
TEST_F(WebViewTest, AContiguousViewHasNoPicture) {
  const std::string dom = RunChromium(base_ + "#capture=scene&record=0", "--dump-dom");
  EXPECT_EQ(MetaValue(dom, "strides"), "(32, 1)") << dom.substr(0, 3000);
  EXPECT_EQ(MetaValue(dom, "start_offset"), "0");
  EXPECT_EQ(MetaValue(dom, "contiguous"), "yes");
  EXPECT_NE(dom.find("id=\"geometry\" hidden"), std::string::npos);
}

// Scalars read as their dtypes: the args table's shape column and the
// record pane (with a screenshot of it).
TEST_F(WebViewTest, ScalarsShowTheirTypedValues) {
  const std::string dom = RunChromium(base_ + "#capture=geometry&record=2", "--dump-dom");
  const std::vector<GeometryScalar> scalars = GeometryScalars();
  for (size_t i = 0; i < scalars.size(); ++i) {
    std::string want = scalars[i].json;
    if (want.front() == '"') want = want.substr(1, want.size() - 2);
    const size_t row = dom.find("data-record-id=\"" + std::to_string(i + 2) + "\"");
    ASSERT_NE(row, std::string::npos) << i << dom.substr(0, 3000);
    const size_t end = dom.find("</tr>", row);
    const std::string cell = "<td class=\"mono\">= ";
    const size_t at = dom.find(cell, row);
    ASSERT_LT(at, end) << "record " << i + 2;
    EXPECT_EQ(dom.substr(at + cell.size(), dom.find('<', at + cell.size()) - at - cell.size()),
              want)
        << "record " << i + 2;
  }
  const std::regex value("id=\"scalar-value\"[^>]*>([^<]*)<");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, value)) << dom.substr(0, 3000);
  EXPECT_EQ(m[1].str(), "0.1");
  EXPECT_NE(dom.find("0x000000003dcccccd"), std::string::npos);

  const std::string png = FreshTempDir("scalar_shot") + "/page.png";
  RunChromium(base_ + "#capture=geometry&record=2", "--screenshot=" + png);
  Image image;
  ASSERT_TRUE(DecodePng(ReadFileToString(png).value_or(""), &image)) << png;
  EXPECT_EQ(image.width, kWidth);
  EXPECT_EQ(image.height, kHeight);
}

// At 1400 px both tables fit their panes: the captures table's right-hand
// columns (Crash, Attached) are in view with a long name and four labels
// listed, and the args table's (bin_size, Flags) with 20-digit scalars.
TEST_F(WebViewTest, TheTablesFitTheirPanesAt1400Px) {
  const std::string dom = RunChromium(base_ + "#capture=geometry", "--dump-dom");
  EXPECT_NE(dom.find(absl::StrCat("data-capture=\"", kLongName, "\"")), std::string::npos);
  EXPECT_NE(dom.find("= 18446744073709551615<"), std::string::npos);
  for (const auto& [table_id, pane_id] : {std::pair<std::string, std::string>{"captures", "captures-pane"},
                                          {"args", "args-pane"}}) {
    Rect table, pane;
    ASSERT_TRUE(ParseRect(Attribute(dom, table_id, "data-rect"), &table)) << table_id
                                                                           << dom.substr(0, 2000);
    ASSERT_TRUE(ParseRect(Attribute(dom, pane_id, "data-rect"), &pane));
    EXPECT_LE(table.x + table.w, pane.x + pane.w)
        << table_id << ": " << table.w << " px in a pane of " << pane.w;
    EXPECT_GT(pane.w, 700);  // the layout's left column, not a narrow one
  }
}

}  // namespace
}  // namespace argsdump
