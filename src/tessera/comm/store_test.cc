// In-memory store semantics, timeouts, prefix view and the store barrier.
#include "tessera/comm/store.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(InMemoryStore, SetGetRoundTripsBytes) {
  auto store = MakeInMemoryStore();
  Bytes value = {0, 1, 2, 255, 0};
  ASSERT_TRUE(store->Set("k", value).ok());
  auto got = store->Get("k", milliseconds(0));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE(store->SetString("s", "hello").ok());
  auto s = store->GetString("s", milliseconds(0));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "hello");
  ASSERT_TRUE(store->Set("k", {7}).ok());  // overwrite
  EXPECT_EQ(*store->Get("k", milliseconds(0)), Bytes{7});
}

TEST(InMemoryStore, GetTimesOutNamingKeyAndWait) {
  auto store = MakeInMemoryStore();
  auto t0 = steady_clock::now();
  auto got = store->Get("missing/key", milliseconds(50));
  auto waited = steady_clock::now() - t0;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status().message().find("missing/key"), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find("50 ms"), std::string::npos) << got.status().ToString();
  EXPECT_GE(waited, milliseconds(50));
  EXPECT_LT(waited, milliseconds(5000));
}

TEST(InMemoryStore, GetWakesWhenAnotherThreadSets) {
  auto store = MakeInMemoryStore();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(store->SetString("late", "v").ok());
  });
  auto got = store->GetString("late", milliseconds(10000));
  setter.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "v");
}

TEST(InMemoryStore, AddIsAtomicCounterAcrossThreads) {
  auto store = MakeInMemoryStore();
  constexpr int kThreads = 4, kIters = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIters; ++i) ASSERT_TRUE(store->Add("ctr", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  auto v = store->Add("ctr", 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, kThreads * kIters);
  EXPECT_EQ(*store->GetString("ctr", milliseconds(0)), std::to_string(kThreads * kIters));
  EXPECT_EQ(*store->Add("ctr", -4000), 0);
  EXPECT_EQ(*store->Add("fresh", -3), -3);
}

TEST(InMemoryStore, AddOnNonCounterIsInvalidArgument) {
  auto store = MakeInMemoryStore();
  ASSERT_TRUE(store->SetString("text", "abc").ok());
  auto v = store->Add("text", 1);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(v.status().message().find("text"), std::string::npos);
}

TEST(InMemoryStore, WaitNamesOnlyMissingKeys) {
  auto store = MakeInMemoryStore();
  ASSERT_TRUE(store->SetString("a", "1").ok());
  Status st = store->Wait({"a", "b", "c"}, milliseconds(10));
  ASSERT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(st.message().find("'a'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'b'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'c'"), std::string::npos) << st.message();
  ASSERT_TRUE(store->SetString("b", "1").ok());
  ASSERT_TRUE(store->SetString("c", "1").ok());
  EXPECT_TRUE(store->Wait({"a", "b", "c"}, milliseconds(0)).ok());
}

TEST(InMemoryStore, DeleteRemovesAndIsIdempotent) {
  auto store = MakeInMemoryStore();
  ASSERT_TRUE(store->SetString("k", "v").ok());
  ASSERT_TRUE(store->Delete("k").ok());
  EXPECT_EQ(store->Get("k", milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(store->Delete("k").ok());
}

TEST(PrefixStore, IsolatesNamespaces) {
  std::shared_ptr<Store> base = MakeInMemoryStore();
  auto a = MakePrefixStore(base, "a/");
  auto b = MakePrefixStore(base, "b/");
  ASSERT_TRUE(a->SetString("k", "from-a").ok());
  ASSERT_TRUE(b->SetString("k", "from-b").ok());
  EXPECT_EQ(*a->GetString("k", milliseconds(0)), "from-a");
  EXPECT_EQ(*b->GetString("k", milliseconds(0)), "from-b");
  EXPECT_EQ(*base->GetString("a/k", milliseconds(0)), "from-a");
  EXPECT_EQ(*a->Add("n", 2), 2);
  EXPECT_EQ(*base->Add("a/n", 0), 2);
  EXPECT_TRUE(a->Wait({"k", "n"}, milliseconds(0)).ok());
  EXPECT_FALSE(b->Wait({"n"}, milliseconds(0)).ok());
  ASSERT_TRUE(a->Delete("k").ok());
  EXPECT_FALSE(base->Get("a/k", milliseconds(0)).ok());
  EXPECT_TRUE(base->Get("b/k", milliseconds(0)).ok());
}

TEST(StoreBarrier, ReleasesAllThreadsAndTimesOutWhenShort) {
  auto store = MakeInMemoryStore();
  constexpr int kWorld = 5;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&] {
      if (StoreBarrier(*store, "b0", kWorld, milliseconds(10000)).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kWorld);

  Status st = StoreBarrier(*store, "b1", 2, milliseconds(20));
  ASSERT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("1 of 2"), std::string::npos) << st.message();
}

TEST(ParseCounter, AcceptsDecimalOnly) {
  int64_t v = 0;
  EXPECT_TRUE(ParseCounter(StringToBytes("-42"), &v));
  EXPECT_EQ(v, -42);
  EXPECT_FALSE(ParseCounter(StringToBytes(""), &v));
  EXPECT_FALSE(ParseCounter(StringToBytes("12x"), &v));
  EXPECT_FALSE(ParseCounter(StringToBytes(" 1"), &v));
}

}  // namespace
}  // namespace tessera::comm
