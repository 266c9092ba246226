#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "tessera/data/arithmetic.h"
#include "tessera/data/token_dataset.h"

namespace tessera::data {
namespace {

std::unique_ptr<ArithmeticDataset> MakeArith(int digits = 3, int64_t seq = 48) {
  auto ds = ArithmeticDataset::Create({digits, seq, 5, 64});
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  return std::move(ds).value();
}

TEST(Arithmetic, ExamplesAreCorrectSums) {
  auto ds = MakeArith();
  Batch b = ds->TrainBatch(0, 4);
  ASSERT_EQ(b.inputs.shape(), (Shape{4, 48}));
  auto ids = b.inputs.ToIntVector();
  std::string text = ArithmeticDataset::Decode(std::vector<int64_t>(ids.begin(), ids.begin() + 48));
  // 48+1 tokens hold 3 examples of 12 tokens plus separators.
  for (int e = 0; e < 3; ++e) {
    std::string ex = text.substr(e * 13, 12);
    ASSERT_EQ(ex[3], '+') << text;
    ASSERT_EQ(ex[7], '=') << text;
    int a = std::stoi(ex.substr(0, 3)), c = std::stoi(ex.substr(4, 3));
    std::string rev = ex.substr(8, 4);
    std::string sum(rev.rbegin(), rev.rend());
    EXPECT_EQ(std::stoi(sum), a + c) << ex;
  }
  // Exactly the sum digits carry loss: 3 examples x 4 digits per row.
  EXPECT_EQ(b.num_target_tokens, 4 * 3 * 4);
}

TEST(Arithmetic, DeterministicByIndexAndSplitsDisjoint) {
  auto ds = MakeArith();
  Batch a = ds->TrainBatch(10, 3);
  Batch b = ds->TrainBatch(11, 1);
  auto av = a.inputs.ToIntVector(), bv = b.inputs.ToIntVector();
  EXPECT_EQ(std::vector<int64_t>(av.begin() + 48, av.begin() + 96), bv);
  // No held-out pair appears in training and vice versa.
  auto check = [&](const Batch& batch, bool held_out) {
    auto v = batch.inputs.ToIntVector();
    for (int64_t r = 0; r < batch.inputs.size(0); ++r) {
      for (int e = 0; e < 3; ++e) {
        const int64_t* p = &v[r * 48 + e * 13];
        int64_t x = p[0] * 100 + p[1] * 10 + p[2], y = p[4] * 100 + p[5] * 10 + p[6];
        EXPECT_EQ(ds->IsHeldOut(x, y), held_out);
      }
    }
  };
  check(ds->TrainBatch(0, 32), false);
  check(ds->EvalBatch(0, 32), true);
}

TEST(Arithmetic, ExactMatchScoring) {
  auto ds = MakeArith(2, 10);  // one 9-token example per row
  Batch b = ds->EvalBatch(0, 2);
  const int64_t v = ArithmeticDataset::kVocab;
  Tensor logits = Tensor::Zeros({2, 10, v});
  float* lp = logits.data<float>();
  auto tg = b.targets.ToIntVector();
  for (int64_t i = 0; i < 20; ++i) {
    if (tg[i] >= 0) lp[i * v + tg[i]] = 1.0f;  // perfect predictions
  }
  EXPECT_EQ(ds->Score(b, logits).hits, 2);
  EXPECT_EQ(ds->Score(b, logits).total, 2);
  // Break one digit of the second example.
  for (int64_t i = 10; i < 20; ++i) {
    if (tg[i] >= 0) {
      lp[i * v + tg[i]] = 0.0f;
      lp[i * v + (tg[i] + 1) % 10] = 1.0f;
      break;
    }
  }
  EXPECT_EQ(ds->Score(b, logits).hits, 1);
}

TEST(Arithmetic, BadConfig) {
  EXPECT_FALSE(ArithmeticDataset::Create({0, 48, 1, 8}).ok());
  auto st = ArithmeticDataset::Create({3, 8, 1, 8});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("seq_len"), std::string::npos);
}

class TempFile {
 public:
  explicit TempFile(const std::string& bytes) {
    char name[] = "/tmp/tessera_data_testXXXXXX";
    int fd = mkstemp(name);
    path_ = name;
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    EXPECT_EQ(n, static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(TokenDataset, TextWindowsAndHeldOut) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += static_cast<char>('a' + i % 26);
  TempFile f(text);
  TokenDatasetConfig c;
  c.paths = {f.path()};
  c.seq_len = 16;
  c.val_fraction = 0.2;
  auto ds = TokenDataset::Create(c);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  Batch b = (*ds)->TrainBatch(0, 4);
  auto in = b.inputs.ToIntVector(), tg = b.targets.ToIntVector();
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((in[i] - 'a' + 1) % 26, tg[i] - 'a');  // next byte
  }
  EXPECT_GE((*ds)->NumEvalSamples(), 1);
  Batch e = (*ds)->EvalBatch(0, 1);
  EXPECT_EQ(e.inputs.ToIntVector()[0], text[160]);
}

TEST(TokenDataset, ShardFormatsAndErrors) {
  std::string raw;
  for (uint16_t t = 0; t < 300; ++t) raw.append(reinterpret_cast<const char*>(&t), 2);
  TempFile u16(raw);
  TokenDatasetConfig c;
  c.paths = {u16.path()};
  c.format = TokenFormat::kUint16;
  c.vocab_size = 300;
  c.seq_len = 8;
  ASSERT_TRUE(TokenDataset::Create(c).ok());
  c.vocab_size = 100;  // token 100 at byte offset 200 is out of range
  auto bad = TokenDataset::Create(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("byte offset 200"), std::string::npos) << bad.status().ToString();

  TempFile odd(raw.substr(0, 11));  // not a multiple of 2 bytes
  c.paths = {odd.path()};
  c.vocab_size = 300;
  auto trunc = TokenDataset::Create(c);
  ASSERT_FALSE(trunc.ok());
  EXPECT_EQ(trunc.status().code(), StatusCode::kDataLoss);

  // llm.c header claiming more tokens than present.
  std::string header(1024, '\0');
  int32_t h[3] = {20240520, 1, 1000};
  std::memcpy(header.data(), h, sizeof(h));
  TempFile llmc(header + raw);
  c.paths = {llmc.path()};
  auto t2 = TokenDataset::Create(c);
  ASSERT_FALSE(t2.ok());
  EXPECT_NE(t2.status().message().find("truncated"), std::string::npos);

  c.paths = {"/nonexistent/tokens.bin"};
  auto missing = TokenDataset::Create(c);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/tokens.bin"), std::string::npos);
}

}  // namespace
}  // namespace tessera::data
