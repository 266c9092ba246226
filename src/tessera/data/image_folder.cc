#include "tessera/data/image_folder.h"

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <list>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/data/png_image.h"
#include "tessera/tensor/rng.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

constexpr size_t kKeptPermutations = 4;          // training epochs whose order stays computed
constexpr uint64_t kEvalOrderSeed = 0x5EED0E7A;  // held-out order: the same for every run

bool Hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

bool IsPng(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png";
}

// Sorted names of the entries of `dir` that `keep` accepts (hidden ones never).
template <typename Keep>
StatusOr<std::vector<std::string>> List(const fs::path& dir, Keep keep) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return IoError("cannot list folder '{}': {}", dir.string(), ec.message());
  std::vector<std::string> names;
  while (it != end) {
    if (!Hidden(it->path()) && keep(*it)) names.push_back(it->path().filename().string());
    it.increment(ec);
    if (ec) return IoError("cannot list folder '{}': {}", dir.string(), ec.message());
  }
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<std::vector<std::string>> ListClasses(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return NotFound("image folder '{}' does not exist", root.string());
  if (!fs::is_directory(root, ec)) return InvalidArgument("image folder '{}' is not a folder", root.string());
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> classes, List(root, [](const fs::directory_entry& e) {
                             std::error_code ec2;
                             return e.is_directory(ec2);
                           }));
  if (classes.empty()) {
    return InvalidArgument("image folder '{}' has no class folders (expected <root>/<class>/*.png)", root.string());
  }
  return classes;
}

// Appends root/<class>/*.png of every class, labelled by class index.
Status ListFiles(const fs::path& root, const std::vector<std::string>& classes,
                 std::vector<std::vector<std::string>>* out) {
  for (const std::string& c : classes) {
    const fs::path dir = root / c;
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> files, List(dir, [](const fs::directory_entry& e) {
                               std::error_code ec;
                               return IsPng(e.path()) && e.is_regular_file(ec);
                             }));
    if (files.empty()) return InvalidArgument("class folder '{}' has no .png images", dir.string());
    for (std::string& f : files) f = (dir / f).string();
    out->push_back(std::move(files));
  }
  return Status::Ok();
}

std::string FirstDifference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const std::string& c : a) {
    if (!std::binary_search(b.begin(), b.end(), c)) return c;
  }
  return "";
}

// A uniformly random permutation of [0, n) (Fisher-Yates on Philox words).
std::vector<int64_t> Permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    const auto w = Philox4x32(seed, 0, static_cast<uint64_t>(i));
    const uint64_t r = (static_cast<uint64_t>(w[0]) << 32) | w[1];
    std::swap(p[i], p[static_cast<int64_t>(r % static_cast<uint64_t>(i + 1))]);
  }
  return p;
}

}  // namespace

struct ImageFolder::Cache {
  using Image = std::shared_ptr<const std::vector<float>>;
  std::mutex mu;
  size_t budget = 0, bytes = 0;
  std::list<int64_t> lru;  // file ids, most recently used first
  std::unordered_map<int64_t, std::pair<Image, std::list<int64_t>::iterator>> images;
  std::deque<std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>>> orders;  // (epoch, permutation)
};

ImageFolder::ImageFolder(const ImageFolderOptions& options) : options_(options), cache_(std::make_unique<Cache>()) {}
ImageFolder::~ImageFolder() = default;

StatusOr<std::unique_ptr<ImageFolder>> ImageFolder::Open(const ImageFolderOptions& o) {
  if (o.root.empty()) return InvalidArgument("image folder: no root folder given");
  if (o.channels != 1 && o.channels != 3) {
    return InvalidArgument("image folder: channels must be 1 or 3, got {}", o.channels);
  }
  if (o.height < 1 || o.width < 1) {
    return InvalidArgument("image folder: size {}x{} must be positive", o.height, o.width);
  }
  if (o.eval_root.empty() && o.eval_every < 2) {
    return InvalidArgument("image folder: eval_every must be >= 2 (every k-th file of a class is held out), got {}",
                           o.eval_every);
  }
  if (o.cache_mb < 0) return InvalidArgument("image folder: cache_mb must be >= 0, got {}", o.cache_mb);
  std::unique_ptr<ImageFolder> f(new ImageFolder(o));
  auto per_channel = [&](const std::vector<float>& v, const char* name, std::vector<float>* out) -> Status {
    if (v.size() == static_cast<size_t>(o.channels)) {
      *out = v;
    } else if (v.size() == 1) {
      out->assign(static_cast<size_t>(o.channels), v[0]);
    } else if (o.channels == 1 && v.size() == 3) {
      out->assign(1, (v[0] + v[1] + v[2]) / 3);
    } else {
      return InvalidArgument("image folder: {} has {} values for {} channels", name, v.size(), o.channels);
    }
    return Status::Ok();
  };
  TESSERA_RETURN_IF_ERROR(per_channel(o.mean, "mean", &f->mean_));
  TESSERA_RETURN_IF_ERROR(per_channel(o.std, "std", &f->std_));
  for (float s : f->std_) {
    if (!(s > 0)) return InvalidArgument("image folder: std values must be > 0, got {}", s);
  }

  TESSERA_ASSIGN_OR_RETURN(f->classes_, ListClasses(o.root));
  std::vector<std::vector<std::string>> files;
  TESSERA_RETURN_IF_ERROR(ListFiles(o.root, f->classes_, &files));
  if (!o.eval_root.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> eval_classes, ListClasses(o.eval_root));
    if (eval_classes != f->classes_) {
      std::string only = FirstDifference(f->classes_, eval_classes);
      const bool in_train = !only.empty();
      if (!in_train) only = FirstDifference(eval_classes, f->classes_);
      return InvalidArgument(
          "held-out folder '{}' and training folder '{}' have different classes ({} vs {}): "
          "class '{}' is only in '{}'",
          o.eval_root, o.root, eval_classes.size(), f->classes_.size(), only, in_train ? o.root : o.eval_root);
    }
    std::vector<std::vector<std::string>> eval_files;
    TESSERA_RETURN_IF_ERROR(ListFiles(o.eval_root, f->classes_, &eval_files));
    for (size_t c = 0; c < files.size(); ++c) {
      for (std::string& p : files[c]) f->train_.push_back({std::move(p), static_cast<int64_t>(c)});
      for (std::string& p : eval_files[c]) f->eval_.push_back({std::move(p), static_cast<int64_t>(c)});
    }
  } else {
    for (size_t c = 0; c < files.size(); ++c) {
      for (size_t i = 0; i < files[c].size(); ++i) {
        const bool held_out = static_cast<int64_t>(i % static_cast<size_t>(o.eval_every)) == o.eval_every - 1;
        (held_out ? f->eval_ : f->train_).push_back({std::move(files[c][i]), static_cast<int64_t>(c)});
      }
    }
    if (f->eval_.empty()) {
      return InvalidArgument(
          "image folder '{}': no held-out images (every class has fewer than eval_every = {} "
          "files); lower eval_every or give a held-out folder",
          o.root, o.eval_every);
    }
  }
  f->eval_order_ = Permutation(static_cast<int64_t>(f->eval_.size()), kEvalOrderSeed);
  f->cache_->budget = static_cast<size_t>(o.cache_mb) << 20;
  return f;
}

std::string ImageFolder::Describe() const {
  return fmt::format("{}x{} images of {} classes from '{}' ({} training, {} held-out{})", options_.height,
                     options_.width, classes_.size(), options_.root, train_.size(), eval_.size(),
                     options_.eval_root.empty() ? fmt::format(": 1 in {} of each class", options_.eval_every)
                                                : " in '" + options_.eval_root + "'");
}

int64_t ImageFolder::TrainId(int64_t index) const {
  TESSERA_CHECK(index >= 0, "image folder: sample index {}", index);
  const int64_t n = train_size(), epoch = index / n;
  std::shared_ptr<const std::vector<int64_t>> order;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    for (const auto& [e, p] : cache_->orders) {
      if (e == epoch) order = p;
    }
  }
  if (order == nullptr) {
    order = std::make_shared<const std::vector<int64_t>>(
        Permutation(n, DeriveSeed(options_.seed, static_cast<uint64_t>(epoch))));
    std::lock_guard<std::mutex> lock(cache_->mu);
    cache_->orders.emplace_back(epoch, order);
    if (cache_->orders.size() > kKeptPermutations) cache_->orders.pop_front();
  }
  return (*order)[static_cast<size_t>(index % n)];
}

const ImageFolder::File& ImageFolder::TrainFile(int64_t index) const { return train_[TrainId(index)]; }

const ImageFolder::File& ImageFolder::EvalFile(int64_t index) const {
  TESSERA_CHECK(index >= 0, "image folder: sample index {}", index);
  return eval_[eval_order_[static_cast<size_t>(index % eval_size())]];
}

int64_t ImageFolder::cached_bytes() const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  return static_cast<int64_t>(cache_->bytes);
}

StatusOr<std::shared_ptr<const std::vector<float>>> ImageFolder::Load(int64_t id) const {
  Cache& c = *cache_;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.images.find(id); it != c.images.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second.second);
      return it->second.first;
    }
  }
  const File& file = id < train_size() ? train_[id] : eval_[id - train_size()];
  TESSERA_ASSIGN_OR_RETURN(DecodedImage decoded, DecodePng(file.path, options_.channels));
  auto image = std::make_shared<const std::vector<float>>(ResizeBilinear(decoded, options_.height, options_.width));
  const size_t bytes = image->size() * sizeof(float);
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.images.find(id); it != c.images.end()) return it->second.first;  // another thread was first
  if (bytes > c.budget) return image;
  while (c.bytes + bytes > c.budget) {
    auto victim = c.images.find(c.lru.back());
    c.bytes -= victim->second.first->size() * sizeof(float);
    c.images.erase(victim);
    c.lru.pop_back();
  }
  c.lru.push_front(id);
  c.images.emplace(id, std::make_pair(image, c.lru.begin()));
  c.bytes += bytes;
  return image;
}

StatusOr<ImageBatch> ImageFolder::TrainBatch(int64_t first, int64_t n) const {
  if (first < 0 || n < 1) return InvalidArgument("image folder: training batch [{}, +{})", first, n);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) ids[b] = TrainId(first + b);
  return Make(ids);
}

StatusOr<ImageBatch> ImageFolder::EvalBatch(int64_t first, int64_t n) const {
  if (first < 0 || n < 1) return InvalidArgument("image folder: held-out batch [{}, +{})", first, n);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) ids[b] = train_size() + eval_order_[static_cast<size_t>((first + b) % eval_size())];
  return Make(ids);
}

StatusOr<ImageBatch> ImageFolder::Make(const std::vector<int64_t>& ids) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t C = options_.channels, H = options_.height, W = options_.width;
  const bool nchw = options_.layout == ops::ImageLayout::kNCHW;
  ImageBatch batch;
  batch.images = nchw ? Tensor::Empty({n, C, H, W}) : Tensor::Empty({n, H, W, C});
  batch.labels = Tensor::Empty({n}, DType::kI64);
  float* out = batch.images.data<float>();
  int64_t* labels = batch.labels.data<int64_t>();
  std::vector<Status> errors(static_cast<size_t>(n));
  // Samples are independent: threads split the batch (the result does not
  // depend on how). Decoding dominates, so hand them out dynamically.
#pragma omp parallel for schedule(dynamic) if (n > 1 && !omp_in_parallel())
  for (int64_t b = 0; b < n; ++b) {
    const int64_t id = ids[b];
    labels[b] = id < train_size() ? train_[id].label : eval_[id - train_size()].label;
    auto image = Load(id);
    if (!image.ok()) {
      errors[b] = image.status();
      continue;
    }
    const float* px = (*image)->data();  // [H, W, C] in [0, 1]
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t x = 0; x < W; ++x) {
        for (int64_t c = 0; c < C; ++c) {
          const float v = (px[(y * W + x) * C + c] - mean_[c]) / std_[c];
          out[nchw ? ((b * C + c) * H + y) * W + x : ((b * H + y) * W + x) * C + c] = v;
        }
      }
    }
  }
  for (const Status& st : errors) {
    if (!st.ok()) return st;
  }
  return batch;
}

}  // namespace tessera::data
