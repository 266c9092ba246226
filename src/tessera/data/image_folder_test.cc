#include "tessera/data/image_folder.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tessera/data/png_test_util.h"

namespace tessera::data {
namespace {

namespace fs = std::filesystem;
using testing::WritePng;
using testing::WriteRgb;

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera_folder_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Touch(const fs::path& p, const std::string& text = "not an image") { std::ofstream(p) << text; }

std::unique_ptr<ImageFolder> OpenOk(const ImageFolderOptions& o) {
  auto f = ImageFolder::Open(o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

ImageFolderOptions Options(const fs::path& root, int64_t h, int64_t w, int64_t eval_every = 2) {
  ImageFolderOptions o;
  o.root = root.string();
  o.height = h;
  o.width = w;
  o.eval_every = eval_every;
  return o;
}

// Every file of root/<class>/ gets distinct pixels: [h, w, 3] from a per-file value.
std::map<std::string, std::vector<uint8_t>> WriteDistinct(const fs::path& root, const std::vector<std::string>& classes,
                                                          int per_class, int h, int w) {
  std::map<std::string, std::vector<uint8_t>> pixels;
  int file = 0;
  for (const std::string& c : classes) {
    fs::create_directories(root / c);
    for (int i = 0; i < per_class; ++i, ++file) {
      std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
      for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(file * 31 + k * 17 + 1);
      const fs::path p = root / c / ("img_" + std::to_string(10 + i) + ".png");
      WriteRgb(p, w, h, px);
      pixels[p.string()] = px;
    }
  }
  return pixels;
}

TEST(ImageFolder, LabelsAreSortedClassFolders) {
  const fs::path root = TempDir("labels");
  // zebra red, ant green, Moose blue; byte order puts "Moose" first.
  testing::WriteColorFolder(root, {"zebra", "ant", "Moose"}, {{{250, 5, 5}}, {{5, 250, 5}}, {{5, 5, 250}}}, 2, 4, 4, 3);
  WriteRgb(root / "zebra" / "z_upper.PNG", 4, 4, std::vector<uint8_t>(48, 0));
  Touch(root / "README.txt");                             // a file at the root: ignored
  fs::create_directories(root / ".hidden_class");         // hidden: ignored
  Touch(root / "zebra" / ".hidden.png", "garbage");       // hidden: never read
  Touch(root / "zebra" / "notes.txt");                    // not .png
  fs::create_directories(root / "zebra" / "nested.png");  // a folder, not an image
  auto f = OpenOk(Options(root, 4, 4));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->classes(), (std::vector<std::string>{"Moose", "ant", "zebra"}));
  EXPECT_EQ(f->num_classes(), 3);
  // Moose, ant: 2 files, the second held out; zebra: img_00, img_01, z_upper.PNG.
  EXPECT_EQ(f->train_size(), 4);
  EXPECT_EQ(f->eval_size(), 3);
  std::set<std::string> trained;
  for (int64_t i = 0; i < f->train_size(); ++i) trained.insert(fs::path(f->TrainFile(i).path).filename().string());
  EXPECT_EQ(trained, (std::set<std::string>{"img_00.png", "z_upper.PNG"}));
  auto batch = f->TrainBatch(0, 4);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const std::vector<int64_t> labels = batch->labels.ToIntVector();
  const std::vector<float> px = batch->images.ToFloatVector();  // NCHW
  for (int64_t b = 0; b < 4; ++b) {
    const ImageFolder::File& file = f->TrainFile(b);
    EXPECT_EQ(labels[b], file.label);
    EXPECT_EQ(f->classes()[file.label], fs::path(file.path).parent_path().filename().string());
    if (file.path.ends_with(".PNG")) continue;  // the black one
    // The class's colour channel is the brightest: Moose blue (2), ant green (1), zebra red (0).
    std::vector<double> mean(3, 0);
    for (int c = 0; c < 3; ++c) {
      for (int k = 0; k < 16; ++k) mean[c] += px[(b * 3 + c) * 16 + k] * f->options().std[c] + f->options().mean[c];
    }
    EXPECT_EQ(std::max_element(mean.begin(), mean.end()) - mean.begin(), 2 - labels[b]) << file.path;
  }
  fs::remove_all(root);
}

TEST(ImageFolder, PixelsAreScaledAndNormalizedPerChannel) {
  const fs::path root = TempDir("normalize");
  const auto pixels = WriteDistinct(root, {"a", "b"}, 2, 2, 3);
  for (int variant = 0; variant < 3; ++variant) {
    ImageFolderOptions o = Options(root, 2, 3);  // the files' size: no resize
    std::vector<float> mean = o.mean, std = o.std;
    if (variant == 1) {  // one value for every channel
      o.mean = {0.5f};
      o.std = {0.25f};
      mean.assign(3, 0.5f);
      std.assign(3, 0.25f);
    }
    if (variant == 2) {  // gray: luma, the average of ImageNet's statistics
      o.channels = 1;
      mean = {(0.485f + 0.456f + 0.406f) / 3};
      std = {(0.229f + 0.224f + 0.225f) / 3};
    }
    auto f = OpenOk(o);
    ASSERT_NE(f, nullptr);
    const int64_t C = o.channels;
    auto batch = f->TrainBatch(0, 2);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_EQ(batch->images.shape(), (Shape{2, C, 2, 3}));
    const std::vector<float> got = batch->images.ToFloatVector();
    for (int64_t b = 0; b < 2; ++b) {
      const std::vector<uint8_t>& px = pixels.at(f->TrainFile(b).path);
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t i = 0; i < 6; ++i) {
          const uint32_t r = px[i * 3], g = px[i * 3 + 1], bl = px[i * 3 + 2];
          const float v =
              C == 3 ? px[i * 3 + c] : static_cast<float>((19595 * r + 38470 * g + 7471 * bl + 32768) >> 16);
          EXPECT_NEAR(got[(b * C + c) * 6 + i], (v / 255.0f - mean[c]) / std[c], 1e-5)
              << "variant " << variant << " sample " << b << " channel " << c << " pixel " << i;
        }
      }
    }
  }
  fs::remove_all(root);
}

TEST(ImageFolder, ResizesBilinearly) {
  const fs::path root = TempDir("resize");
  fs::create_directories(root / "only");
  for (const char* name : {"a.png", "b.png"}) {
    WritePng(root / "only" / name, 2, 2, PNG_COLOR_TYPE_GRAY, 8, {0, 100, 200, 255});
  }
  ImageFolderOptions o = Options(root, 3, 3);
  o.channels = 1;
  o.mean = {0};
  o.std = {1};
  auto f = OpenOk(o);
  ASSERT_NE(f, nullptr);
  auto batch = f->EvalBatch(0, 1);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const std::vector<float> want = {0, 50, 100, 100, 138.75f, 177.5f, 200, 227.5f, 255};  // x 1/255
  const std::vector<float> got = batch->images.ToFloatVector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i] / 255.0f, 1e-6) << i;
  fs::remove_all(root);
}

TEST(ImageFolder, HeldOutFilesAreNeverTrainedOn) {
  const fs::path root = TempDir("split");
  WriteDistinct(root, {"x", "y", "z"}, 25, 2, 2);
  auto f = OpenOk(Options(root, 2, 2, /*eval_every=*/10));
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->train_size(), 69);
  ASSERT_EQ(f->eval_size(), 6);  // files 9 and 19 of each class
  std::set<std::string> train, eval;
  std::vector<std::string> epoch0, epoch1;
  for (int64_t i = 0; i < 69; ++i) {
    epoch0.push_back(f->TrainFile(i).path);
    epoch1.push_back(f->TrainFile(69 + i).path);
  }
  train.insert(epoch0.begin(), epoch0.end());
  EXPECT_EQ(train.size(), 69u) << "each training file once per epoch";
  EXPECT_EQ(std::set<std::string>(epoch1.begin(), epoch1.end()), train);
  EXPECT_NE(epoch0, epoch1) << "each epoch is shuffled anew";
  std::set<int64_t> eval_labels;
  for (int64_t i = 0; i < 6; ++i) {
    const ImageFolder::File& file = f->EvalFile(i);
    eval.insert(file.path);
    eval_labels.insert(file.label);
    const std::string name = fs::path(file.path).filename().string();
    EXPECT_TRUE(name == "img_19.png" || name == "img_29.png") << name;  // sorted positions 9 and 19
    EXPECT_EQ(train.count(file.path), 0u) << file.path;
  }
  EXPECT_EQ(eval.size(), 6u);
  EXPECT_EQ(eval_labels, (std::set<int64_t>{0, 1, 2}));

  // No held-out file when every class has fewer than eval_every files.
  auto none = ImageFolder::Open(Options(root, 2, 2, 26));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no held-out images"), std::string::npos) << none.status().ToString();

  // A separate held-out folder: all of root trains.
  const fs::path val = TempDir("split_val");
  WriteDistinct(val, {"x", "y", "z"}, 2, 2, 2);
  ImageFolderOptions o = Options(root, 2, 2);
  o.eval_root = val.string();
  auto g = OpenOk(o);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->train_size(), 75);
  EXPECT_EQ(g->eval_size(), 6);
  EXPECT_TRUE(g->EvalFile(0).path.starts_with(val.string()));
  fs::remove_all(root);
  fs::remove_all(val);
}

std::vector<float> Pixels(const StatusOr<ImageBatch>& b) {
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? b->images.ToFloatVector() : std::vector<float>{};
}

TEST(ImageFolder, SamplesDependOnlyOnTheirIndex) {
  const fs::path root = TempDir("determinism");
  WriteDistinct(root, {"a", "b", "c"}, 5, 6, 5);
  ImageFolderOptions o = Options(root, 4, 4);
  auto f = OpenOk(o);
  ASSERT_NE(f, nullptr);
  const int64_t n = f->train_size(), per = 3 * 4 * 4;
  ASSERT_EQ(n, 9);
  const std::vector<float> whole = Pixels(f->TrainBatch(5, 6));
  const std::vector<float> part = Pixels(f->TrainBatch(8, 2));  // crosses into the second epoch
  ASSERT_EQ(whole.size(), static_cast<size_t>(6 * per));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 3 * per));
  // Another instance, without a cache, fetching in another order: the same.
  o.cache_mb = 0;
  auto g = OpenOk(o);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(Pixels(g->TrainBatch(9, 2)), std::vector<float>(whole.begin() + 4 * per, whole.end()));
  EXPECT_EQ(Pixels(g->TrainBatch(5, 6)), whole);
  EXPECT_EQ(g->cached_bytes(), 0);
  EXPECT_GT(f->cached_bytes(), 0);
  // Far epochs wrap: labels follow the files the order names.
  auto far = g->TrainBatch(40 * n + 3, 4);
  ASSERT_TRUE(far.ok());
  for (int64_t b = 0; b < 4; ++b) EXPECT_EQ(far->labels.ToIntVector()[b], g->TrainFile(40 * n + 3 + b).label);
  // Held-out indices wrap modulo the split's size.
  EXPECT_EQ(Pixels(f->EvalBatch(1, 2)), Pixels(f->EvalBatch(1 + f->eval_size(), 2)));
  // Another seed: another order.
  o.seed = 99;
  auto h = OpenOk(o);
  std::vector<std::string> a, b;
  for (int64_t i = 0; i < n; ++i) {
    a.push_back(f->TrainFile(i).path);
    b.push_back(h->TrainFile(i).path);
  }
  EXPECT_NE(a, b);
  // Several threads at once (a 1 MiB cache that evicts): the same pixels.
  const fs::path big = TempDir("determinism_big");
  WriteDistinct(big, {"a", "b"}, 12, 40, 40);
  ImageFolderOptions bo = Options(big, 128, 128);
  bo.cache_mb = 1;  // 192 KiB per image: holds 5 of the 12
  auto shared = OpenOk(bo);
  bo.cache_mb = 0;
  auto reference = OpenOk(bo);
  std::vector<std::vector<float>> want(4), got(4);
  for (int t = 0; t < 4; ++t) want[t] = Pixels(reference->TrainBatch(t * 7, 9));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        Pixels(shared->TrainBatch(t * 5 + (r + 3) * shared->train_size(), 9));  // other epochs, evicting
        got[t] = Pixels(shared->TrainBatch(t * 7, 9));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], want[t]) << "thread " << t;
  EXPECT_LE(shared->cached_bytes(), 1 << 20);
  fs::remove_all(root);
  fs::remove_all(big);
}

TEST(ImageFolder, LayoutsHoldTheSamePixels) {
  const fs::path root = TempDir("layouts");
  WriteDistinct(root, {"a", "b"}, 3, 5, 4);
  ImageFolderOptions o = Options(root, 3, 6);
  auto nchw = OpenOk(o);
  o.layout = ops::ImageLayout::kNHWC;
  auto nhwc = OpenOk(o);
  ASSERT_TRUE(nchw && nhwc);
  auto a = nchw->TrainBatch(2, 3), b = nhwc->TrainBatch(2, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->images.shape(), (Shape{3, 3, 6, 3}));
  EXPECT_EQ(a->images.ToFloatVector(), b->images.Permute({0, 3, 1, 2}).Contiguous().ToFloatVector());
  EXPECT_EQ(a->labels.ToIntVector(), b->labels.ToIntVector());
  fs::remove_all(root);
}

TEST(ImageFolder, BadFilesFailTheBatchNamingThem) {
  const fs::path root = TempDir("badfiles");
  WriteDistinct(root, {"a", "b"}, 4, 3, 3);
  std::ifstream in(root / "a" / "img_10.png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(root / "a" / "img_12.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);  // cut
  std::ofstream(root / "b" / "img_10.png", std::ios::binary) << std::string(300, '\x5a');           // garbage
  auto f = OpenOk(Options(root, 3, 3, /*eval_every=*/4));                                           // files 13 held out
  ASSERT_NE(f, nullptr);
  for (const char* bad : {"a/img_12.png", "b/img_10.png"}) {
    const std::string path = (root / bad).string();
    int64_t index = -1;
    for (int64_t i = 0; i < f->train_size(); ++i) index = f->TrainFile(i).path == path ? i : index;
    ASSERT_GE(index, 0) << bad;
    auto batch = f->TrainBatch(index, 1);
    ASSERT_FALSE(batch.ok()) << bad;
    EXPECT_EQ(batch.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(batch.status().message().find(path), std::string::npos) << batch.status().ToString();
    // The same in a whole epoch's batch (decoded in parallel).
    auto all = f->TrainBatch(0, f->train_size());
    ASSERT_FALSE(all.ok());
  }
  EXPECT_TRUE(f->EvalBatch(0, 2).ok());  // the held-out files are fine
  fs::remove_all(root);
}

TEST(ImageFolder, FolderErrorsNameTheFolder) {
  const fs::path root = TempDir("errors");
  auto fails = [](const ImageFolderOptions& o, StatusCode code, const std::string& words) {
    auto f = ImageFolder::Open(o);
    ASSERT_FALSE(f.ok()) << words;
    EXPECT_EQ(f.status().code(), code) << f.status().ToString();
    EXPECT_NE(f.status().message().find(words), std::string::npos) << f.status().ToString();
  };
  fails(Options(root / "missing", 4, 4), StatusCode::kNotFound, (root / "missing").string());
  fails(Options(root, 4, 4), StatusCode::kInvalidArgument, "no class folders");  // empty
  Touch(root / "file");
  fails(Options(root / "file", 4, 4), StatusCode::kInvalidArgument, "not a folder");
  WriteDistinct(root, {"cat", "dog"}, 2, 2, 2);
  fs::create_directories(root / "emu");
  Touch(root / "emu" / "readme.txt");
  fails(Options(root, 4, 4), StatusCode::kInvalidArgument, (root / "emu").string());
  fs::remove_all(root / "emu");
  ASSERT_NE(OpenOk(Options(root, 4, 4)), nullptr);

  const fs::path val = TempDir("errors_val");
  WriteDistinct(val, {"cat", "dot"}, 1, 2, 2);
  ImageFolderOptions o = Options(root, 4, 4);
  o.eval_root = val.string();
  fails(o, StatusCode::kInvalidArgument, "class 'dog' is only in '" + root.string() + "'");
  fs::remove_all(val / "dot");
  fails(o, StatusCode::kInvalidArgument, "different classes");
  WriteDistinct(val, {"dog", "eel"}, 1, 2, 2);
  fails(o, StatusCode::kInvalidArgument, "class 'eel' is only in '" + val.string() + "'");
  fs::remove_all(val / "eel");
  ASSERT_NE(OpenOk(o), nullptr);

  ImageFolderOptions bad = Options(root, 4, 4);
  bad.channels = 2;
  fails(bad, StatusCode::kInvalidArgument, "channels");
  bad = Options(root, 4, 4);
  bad.mean = {0.1f, 0.2f};
  fails(bad, StatusCode::kInvalidArgument, "mean");
  bad = Options(root, 4, 4, /*eval_every=*/1);
  fails(bad, StatusCode::kInvalidArgument, "eval_every");
  fs::remove_all(root);
  fs::remove_all(val);
}

}  // namespace
}  // namespace tessera::data
