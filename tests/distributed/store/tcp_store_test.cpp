// TCPStore specifics: connecting, dead servers, workers, misbehaving clients.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "distributed/store/Socket.h"
#include "distributed/store/TCPStore.h"
#include "distributed/store/TCPStoreProtocol.h"
#include "tests/TestUtil.h"

namespace loom {
namespace testing {
namespace {

using distributed::TCPStore;
using distributed::TCPStoreOptions;
using distributed::to_string;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TCPStoreOptions options(bool is_master, milliseconds timeout = milliseconds(3000)) {
  TCPStoreOptions o;
  o.is_master = is_master;
  o.timeout = timeout;
  return o;
}

// A port nothing listens on (bound once, then released).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(TCPStoreTest, MasterPicksAFreePortAndClientsShareData) {
  TCPStore master("127.0.0.1", 0, options(true));
  EXPECT_TRUE(master.is_master());
  EXPECT_GT(master.port(), 0);
  TCPStore client("127.0.0.1", master.port(), options(false));
  EXPECT_FALSE(client.is_master());
  EXPECT_EQ(client.port(), master.port());
  client.set("from_client", std::string("c"));
  master.set("from_master", std::string("m"));
  EXPECT_EQ(to_string(master.get("from_client")), "c");
  EXPECT_EQ(to_string(client.get("from_master")), "m");
  EXPECT_EQ(client.timeout(), milliseconds(3000));
}

TEST(TCPStoreTest, ResolvesHostNames) {
  TCPStore master("localhost", 0, options(true));
  TCPStore client("localhost", master.port(), options(false));
  client.set("k", std::string("v"));
  EXPECT_EQ(to_string(master.get("k")), "v");
}

TEST(TCPStoreTest, ClientWithNoServerGivesUpAfterItsTimeout) {
  const int port = unused_port();
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", port, options(false, milliseconds(300))),
                    "could not connect to 127.0.0.1:" + std::to_string(port), "300 ms",
                    "Connection refused");
  const double waited = seconds_since(start);
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 1.0);
}

TEST(TCPStoreTest, ClientRetriesUntilTheMasterAppears) {
  const int port = unused_port();
  std::unique_ptr<TCPStore> master;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    master.reset(new TCPStore("127.0.0.1", port, options(true)));
  });
  TCPStore client("127.0.0.1", port, options(false));
  client.set("k", std::string("v"));
  starter.join();
  EXPECT_EQ(to_string(master->get("k")), "v");
}

TEST(TCPStoreTest, AddressInUseNamesThePort) {
  TCPStore master("127.0.0.1", 0, options(true));
  const std::string port = std::to_string(master.port());
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", master.port(), options(true)), "port " + port,
                    "in use");
}

TEST(TCPStoreTest, RejectsBadArguments) {
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", 0, options(false)), "port 0");
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", 70000, options(true)), "70000");
  EXPECT_LOOM_ERROR(TCPStore("", 1234, options(false)), "host");
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", 0, options(true, milliseconds(0))), "timeout");
}

TEST(TCPStoreTest, IdleClientOfADeadMasterFailsPromptly) {
  auto master = std::make_unique<TCPStore>("127.0.0.1", 0, options(true));
  const std::string address = "127.0.0.1:" + std::to_string(master->port());
  TCPStore client("127.0.0.1", master->port(), options(false));
  client.set("k", std::string("v"));
  master.reset();
  auto start = Clock::now();
  EXPECT_LOOM_ERROR(client.get("k"), address, "closed the connection");
  EXPECT_LT(seconds_since(start), 1.0);
  // Later calls cannot reconnect and say so, also without waiting long.
  start = Clock::now();
  EXPECT_LOOM_ERROR(client.set("k", std::string("v")), address);
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(TCPStoreTest, BlockedGetFailsPromptlyWhenTheMasterDies) {
  auto master = std::make_unique<TCPStore>("127.0.0.1", 0, options(true));
  const std::string address = "127.0.0.1:" + std::to_string(master->port());
  TCPStore client("127.0.0.1", master->port(), options(false));
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    master.reset();
  });
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(client.get("never_set"), address, "closed the connection");
  EXPECT_LT(seconds_since(start), 1.0);
  killer.join();
}

TEST(TCPStoreTest, MasterWaitsForWorkers) {
  const int port = unused_port();
  TCPStoreOptions master_options = options(true);
  master_options.world_size = 3;
  master_options.wait_for_workers = true;
  std::vector<std::thread> workers;
  std::vector<std::unique_ptr<TCPStore>> clients(2);
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&, i] {
      std::this_thread::sleep_for(milliseconds(100 + 50 * i));
      TCPStoreOptions o = options(false);
      o.world_size = 3;
      clients[i].reset(new TCPStore("127.0.0.1", port, o));
    });
  }
  const auto start = Clock::now();
  TCPStore master("127.0.0.1", port, master_options);
  EXPECT_GE(seconds_since(start), 0.14);
  for (auto& worker : workers) worker.join();
  // The bookkeeping keys are not user keys.
  EXPECT_EQ(master.num_keys(), 0);
}

TEST(TCPStoreTest, WaitForWorkersTimesOutSayingHowManyJoined) {
  TCPStoreOptions o = options(true, milliseconds(300));
  o.world_size = 2;
  o.wait_for_workers = true;
  const auto start = Clock::now();
  EXPECT_LOOM_ERROR(TCPStore("127.0.0.1", 0, o), "only 1 of 2 workers", "300 ms");
  EXPECT_LT(seconds_since(start), 1.5);
}

// Sends raw bytes to the server and closes the connection.
void send_raw(int port, const std::string& bytes) {
  std::string error;
  distributed::net::Socket socket = distributed::net::try_connect(
      "127.0.0.1", port, distributed::net::deadline_after(milliseconds(1000)), &error);
  ASSERT_TRUE(socket.valid()) << error;
  distributed::net::send_all(socket, bytes.data(), bytes.size(),
                             distributed::net::deadline_after(milliseconds(1000)));
  std::this_thread::sleep_for(milliseconds(20));
}

TEST(TCPStoreTest, ServerSurvivesMisbehavingClients) {
  namespace tcp = distributed::tcpstore;
  TCPStore master("127.0.0.1", 0, options(true));
  // A client that disconnects while parked in a get.
  send_raw(master.port(),
           tcp::Writer().u8(uint8_t(tcp::Op::kGet)).str("nobody_sets_this").i64(60000).finish());
  // One that claims a 2 GiB message, one that stops mid-message, one that
  // sends an unknown request code and a truncated body.
  send_raw(master.port(), std::string("\xff\xff\xff\x7f", 4));
  send_raw(master.port(), tcp::Writer().u8(uint8_t(tcp::Op::kSet)).str("k").str("v").finish().substr(0, 7));
  send_raw(master.port(), tcp::Writer().u8(99).finish() + tcp::Writer().u8(uint8_t(tcp::Op::kSet)).finish());
  TCPStore client("127.0.0.1", master.port(), options(false));
  client.set("still", std::string("works"));
  EXPECT_EQ(to_string(master.get("still")), "works");
  EXPECT_EQ(master.num_keys(), 1);
}

TEST(TCPStoreTest, ManyClientsWaitOnOneKey) {
  TCPStore master("127.0.0.1", 0, options(true));
  std::vector<std::thread> threads;
  std::vector<std::string> seen(12);
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&, i] {
      TCPStore client("127.0.0.1", master.port(), options(false));
      seen[i] = to_string(client.get("go"));
    });
  }
  std::this_thread::sleep_for(milliseconds(100));
  master.set("go", std::string("now"));
  for (auto& thread : threads) thread.join();
  for (const auto& value : seen) EXPECT_EQ(value, "now");
}

}  // namespace
}  // namespace testing
}  // namespace loom
