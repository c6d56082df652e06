// Where a process learns its rank: explicit values, torchrun/loomrun,
// Slurm and Open MPI variables, and the errors for what is missing.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "distributed/Rendezvous.h"
#include "tests/TestUtil.h"

namespace loom {
namespace distributed {
namespace {

const char* const kAllVars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};

// A port nothing listens on right now.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Clears every launcher variable for the test and sets the given ones.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const char* name : kAllVars) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      unsetenv(name);
    }
    for (const auto& kv : vars) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const char* name : kAllVars) unsetenv(name);
    for (const auto& kv : saved_) setenv(kv.first.c_str(), kv.second.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST(Rendezvous, ExplicitValuesWin) {
  ScopedEnv env({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
  const RendezvousInfo info = rank_from_environment(1, 2);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "explicit");
}

TEST(Rendezvous, TorchrunVariables) {
  ScopedEnv env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}});
  const RendezvousInfo info = rank_from_environment(-1, -1);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.source, "torchrun");
}

TEST(Rendezvous, SlurmVariables) {
  ScopedEnv env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "0"},
                 {"SLURM_NTASKS_PER_NODE", "3(x2)"}});
  const RendezvousInfo info = rank_from_environment(-1, -1);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 6);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 3);
  EXPECT_EQ(info.source, "slurm");
}

TEST(Rendezvous, OpenMpiVariables) {
  ScopedEnv env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const RendezvousInfo info = rank_from_environment(-1, -1);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.source, "openmpi");
}

TEST(Rendezvous, TorchrunTakesPrecedenceOverSlurm) {
  ScopedEnv env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}});
  const RendezvousInfo info = rank_from_environment(-1, -1);
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.source, "torchrun");
}

TEST(Rendezvous, MissingRankNamesTheLaunchers) {
  ScopedEnv env({});
  EXPECT_LOOM_ERROR(rank_from_environment(-1, -1), "RANK and WORLD_SIZE");
}

TEST(Rendezvous, RankOutsideWorld) {
  ScopedEnv env({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
  EXPECT_LOOM_ERROR(rank_from_environment(-1, -1), "rank 4 is outside [0, world_size = 4)");
}

TEST(Rendezvous, MalformedVariable) {
  ScopedEnv env({{"RANK", "one"}, {"WORLD_SIZE", "2"}});
  EXPECT_LOOM_ERROR(rank_from_environment(-1, -1), "RANK='one'");
}

TEST(Rendezvous, EnvMethodNamesMissingMasterVariables) {
  ScopedEnv env({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_LOOM_ERROR(rendezvous("env://", -1, -1, std::chrono::milliseconds(200)),
                    "MASTER_ADDR and MASTER_PORT are not set");
}

TEST(Rendezvous, UnknownSchemeAndBadUrls) {
  ScopedEnv env({});
  EXPECT_LOOM_ERROR(rendezvous("udp://x:1", 0, 1, std::chrono::milliseconds(200)), "unknown init_method");
  EXPECT_LOOM_ERROR(rendezvous("tcp://localhost", 0, 1, std::chrono::milliseconds(200)), "host:port");
  EXPECT_LOOM_ERROR(rendezvous("tcp://localhost:99999", 0, 1, std::chrono::milliseconds(200)),
                    "outside 1..65535");
  EXPECT_LOOM_ERROR(rendezvous("file://relative/path", 0, 1, std::chrono::milliseconds(200)),
                    "file:///absolute/path");
}

TEST(Rendezvous, SingleRankTcpAndFile) {
  ScopedEnv env({});
  // World of one: rank 0 hosts the store and reaches it at once.
  RendezvousInfo tcp = rendezvous("tcp://127.0.0.1:" + std::to_string(free_port()), 0, 1, std::chrono::milliseconds(2000));
  ASSERT_TRUE(tcp.store);
  tcp.store->set("k", "v");
  EXPECT_EQ(to_string(tcp.store->get("k")), "v");

  char dir[] = "/tmp/loom_rdv_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  RendezvousInfo file = rendezvous(std::string("file://") + dir + "/store", 0, 1, std::chrono::milliseconds(2000));
  file.store->set("k", "w");
  EXPECT_EQ(to_string(file.store->get("k")), "w");
}

TEST(Rendezvous, LocalAddressTowardsAHost) {
  EXPECT_EQ(local_address_towards("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(local_address_towards("localhost"), "127.0.0.1");
  EXPECT_EQ(local_address_towards(""), "127.0.0.1");
  EXPECT_EQ(local_address_towards("no-such-host.invalid"), "127.0.0.1");
  // A routable address gives one of this machine's own addresses: a dotted
  // quad that is not empty (which one depends on the machine).
  const std::string via = local_address_towards("10.255.255.1");
  EXPECT_EQ(std::count(via.begin(), via.end(), '.'), 3) << via;
}

}  // namespace
}  // namespace distributed
}  // namespace loom
