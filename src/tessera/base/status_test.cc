#include "tessera/base/status.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tessera/base/check.h"
#include "tessera/base/error.h"

namespace tessera {
namespace {

TEST(Status, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok());
  EXPECT_TRUE(s.WithContext("never shown").ok());
}

TEST(Status, FactoryFormatsMessage) {
  Status s = NotFound("file '{}' has {} bytes", "a.bin", 42);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "file 'a.bin' has 42 bytes");
  EXPECT_EQ(s.ToString(), "NotFound: file 'a.bin' has 42 bytes");
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "DataLoss");
}

TEST(Status, ContextChainText) {
  Status inner = IoError("read failed: short read at offset {}", 128);
  Status mid = inner.WithContext("loading shard 'model-00001.safetensors'");
  Status outer = std::move(mid).WithContext("restoring checkpoint 'ckpt/step-100'");
  EXPECT_EQ(outer.code(), StatusCode::kIoError);
  EXPECT_EQ(outer.message(), "read failed: short read at offset 128");
  EXPECT_EQ(outer.ToString(),
            "IoError: read failed: short read at offset 128\n"
            "  while loading shard 'model-00001.safetensors'\n"
            "  while restoring checkpoint 'ckpt/step-100'");
  // The lvalue overload leaves the original untouched.
  EXPECT_EQ(inner.ToString(), "IoError: read failed: short read at offset 128");
}

Status FailIf(bool fail) {
  if (fail) return InvalidArgument("asked to fail");
  return Status::Ok();
}

Status Chain(bool fail, int* reached) {
  TESSERA_RETURN_IF_ERROR(FailIf(fail));
  *reached = 1;
  return Status::Ok();
}

StatusOr<std::unique_ptr<int>> MakeInt(int v) {
  if (v < 0) return OutOfRange("negative: {}", v);
  return std::make_unique<int>(v);
}

StatusOr<int> Doubled(int v) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<int> p, MakeInt(v));
  return *p * 2;
}

TEST(Status, ReturnIfErrorMacro) {
  int reached = 0;
  EXPECT_EQ(Chain(true, &reached).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusOr, ValueAndError) {
  StatusOr<int> good = Doubled(21);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  EXPECT_EQ(good.value(), 42);
  StatusOr<int> bad = Doubled(-1);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(bad.status().message(), "negative: -1");
  // Move-only values move out.
  StatusOr<std::unique_ptr<int>> p = MakeInt(5);
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 5);
  StatusOr<std::string> s = std::string("abc");
  EXPECT_EQ(s->size(), 3u);
}

TEST(StatusOr, OkStatusIsAnInternalError) {
  StatusOr<int> s = Status::Ok();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInternal);
}

TEST(OpError, MacroThrowsAndConverts) {
  auto op = [](int rank) { TESSERA_OP_CHECK(rank == 2, "MatMul: a must be 2-D, got rank {}", rank); };
  EXPECT_NO_THROW(op(2));
  EXPECT_THROW(op(3), OpError);
  Status s = CatchOpErrors([&] {
    op(3);
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "MatMul: a must be 2-D, got rank 3");
}

TEST(CheckDeathTest, FailedCheckAbortsWithMessage) {
  EXPECT_DEATH(TESSERA_CHECK(1 + 1 == 3, "math is {}", "broken"), "CHECK failed.*1 \\+ 1 == 3.*math is broken");
  EXPECT_DEATH(TESSERA_CHECK_OK(DataLoss("torn")), "DataLoss: torn");
}

}  // namespace
}  // namespace tessera
