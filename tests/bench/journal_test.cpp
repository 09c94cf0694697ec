// saga_bench's replay judgement (bench/journal.hpp): what the API promises
// for a replay of a journaled transfer, and for a changed one.
#include "bench/journal.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

namespace tally::bench {
namespace {

http::response answer(int status, const std::string& body, bool replayed = true) {
  http::response r{static_cast<boost::beast::http::status>(status), 11};
  if (replayed) r.set("Idempotent-Replayed", "true");
  r.body() = body;
  return r;
}

const journal_entry completed{{"/v1/transfers", R"({"amount":1,"biz_id":"t-1"})", 7}, 200, "sg-1", "completed"};
const journal_entry running{{"/v1/transfers", R"({"amount":1,"biz_id":"t-2"})", 8}, 202, "sg-2", "running"};

TEST(ReplayDifference, TheSameSettledSagaKeepsThePromise) {
  EXPECT_EQ(replay_difference(completed, false, answer(200, R"({"saga_id":"sg-1","state":"completed"})")), "");
}

TEST(ReplayDifference, AnythingElseForASettledSagaIsADifference) {
  EXPECT_NE(replay_difference(completed, false, answer(200, R"({"saga_id":"sg-9","state":"completed"})")), "");
  EXPECT_NE(replay_difference(completed, false, answer(200, R"({"saga_id":"sg-1","state":"failed"})")), "");
  EXPECT_NE(replay_difference(completed, false, answer(202, R"({"saga_id":"sg-1","state":"running"})")), "");
  EXPECT_NE(replay_difference(completed, false, answer(200, R"({"saga_id":"sg-1","state":"completed"})", false)), "");
  EXPECT_NE(replay_difference(completed, false, answer(503, R"({"error":{"code":"unavailable"}})")), "");
}

TEST(ReplayDifference, ASagaFirstSeenRunningMayHaveSettledSince) {
  EXPECT_EQ(replay_difference(running, false, answer(200, R"({"saga_id":"sg-2","state":"completed"})")), "");
  EXPECT_EQ(replay_difference(running, false, answer(202, R"({"saga_id":"sg-2","state":"running"})")), "");
  EXPECT_NE(replay_difference(running, false, answer(200, R"({"saga_id":"sg-3","state":"completed"})")), "");
}

TEST(ReplayDifference, AChangedRequestMustBeAConflict) {
  EXPECT_EQ(replay_difference(completed, true, answer(422, R"({"error":{"code":"idempotency_conflict"}})", false)), "");
  EXPECT_NE(replay_difference(completed, true, answer(200, R"({"saga_id":"sg-1","state":"completed"})")), "");
  EXPECT_NE(replay_difference(completed, true, answer(422, R"({"error":{"code":"invalid_request"}})", false)), "");
}

TEST(ChangedContent, ChangesTheAmountOnlyAndKeepsTheId) {
  auto changed = changed_content(completed.sent);
  EXPECT_EQ(changed.target, completed.sent.target);
  EXPECT_EQ(changed.id, 7u);
  EXPECT_EQ(nlohmann::json::parse(changed.body), (nlohmann::json{{"amount", 2}, {"biz_id", "t-1"}}));
}

TEST(Journal, ReadsBackWhatItRecorded) {
  const auto path = std::filesystem::temp_directory_path() / ("journal_test_" + std::to_string(::getpid()));
  {
    journal_writer w(path.string());
    w.record(completed.sent, answer(200, R"({"saga_id":"sg-1","state":"completed"})"));
    w.record(running.sent, answer(503, R"({"error":{"code":"unavailable"}})"));
  }
  auto back = read_journal(path.string());
  std::filesystem::remove(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].sent.body, completed.sent.body);
  EXPECT_EQ(back[0].sent.id, 0u);
  EXPECT_EQ(back[0].status, 200);
  EXPECT_EQ(back[0].saga_id, "sg-1");
  EXPECT_EQ(back[0].state, "completed");
  EXPECT_EQ(back[1].status, 503);
  EXPECT_EQ(back[1].saga_id, "");
  EXPECT_EQ(back[1].sent.id, 1u);
}

}  // namespace
}  // namespace tally::bench
