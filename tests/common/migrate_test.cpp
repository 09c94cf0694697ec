// The migration runner against a real server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "common/migrate/migrate.hpp"
#include "tests/support/pg_fixture.hpp"

namespace tally::migrate {
namespace {

namespace fs = std::filesystem;

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tally-mig-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("0001_first.sql", "CREATE TABLE a (id int);\nINSERT INTO a VALUES (1);");
    write("0002_second.sql", "CREATE TABLE b (id int); INSERT INTO b SELECT id FROM a;");
    db_ = test::create_database("mig_it");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& sql) { std::ofstream(dir_ / name) << sql; }
  fs::path dir_;
  std::string db_;
};

TEST_F(MigrateTest, AppliesInOrderOnceAndRecordsVersions) {
  auto r = migrate::apply(db_, load(dir_));
  EXPECT_EQ(r.applied, 2);
  EXPECT_EQ(r.current_version, 2);
  EXPECT_EQ(test::query_int(db_, "SELECT count(*) FROM b"), 1);
  auto again = migrate::apply(db_, load(dir_));
  EXPECT_EQ(again.applied, 0);
  EXPECT_EQ(again.current_version, 2);
  write("0003_third.sql", "ALTER TABLE b ADD COLUMN x int;");
  EXPECT_EQ(migrate::apply(db_, load(dir_)).applied, 1);
  EXPECT_EQ(test::query_int(db_, "SELECT max(version) FROM schema_version"), 3);
}

TEST_F(MigrateTest, TwoProcessesAtOnceApplyEachMigrationOnce) {
  auto migrations = load(dir_);
  std::vector<std::future<outcome>> runs;
  for (int i = 0; i < 4; ++i)
    runs.push_back(std::async(std::launch::async, [&] { return migrate::apply(db_, migrations); }));
  int applied = 0;
  for (auto& f : runs) applied += f.get().applied;
  EXPECT_EQ(applied, 2);
  EXPECT_EQ(test::query_int(db_, "SELECT count(*) FROM a"), 1);
}

TEST_F(MigrateTest, AnEditedAppliedMigrationIsRefused) {
  migrate::apply(db_, load(dir_));
  write("0001_first.sql", "CREATE TABLE a (id bigint);");
  EXPECT_THROW(migrate::apply(db_, load(dir_)), std::runtime_error);
}

TEST_F(MigrateTest, AFailingMigrationAppliesNothing) {
  write("0003_broken.sql", "CREATE TABLE c (id int); SELECT no_such_function();");
  EXPECT_THROW(migrate::apply(db_, load(dir_)), std::runtime_error);
  EXPECT_EQ(test::query_int(db_, "SELECT count(*) FROM pg_tables WHERE tablename IN ('a', 'b', 'c')"), 0);
}

TEST_F(MigrateTest, BadNamesAndRepeatedVersionsAreRefused) {
  write("0002_again.sql", "SELECT 1;");
  EXPECT_THROW(load(dir_), std::runtime_error);
  fs::remove(dir_ / "0002_again.sql");
  write("1_short.sql", "SELECT 1;");
  EXPECT_THROW(load(dir_), std::runtime_error);
}

}  // namespace
}  // namespace tally::migrate
