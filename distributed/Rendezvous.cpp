#include "distributed/Rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "distributed/store/FileStore.h"
#include "distributed/store/TCPStore.h"
#include "tensor/Error.h"

namespace loom {
namespace distributed {
namespace {

int parse_int(const char* name, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  LOOM_CHECK(end != text && *end == '\0' && value >= 0 && value < (1L << 30),
             "init_process_group: environment variable ", name, "='", text,
             "' is not a non-negative integer");
  return static_cast<int>(value);
}

// Local rank and size only place processes on devices, and Slurm writes
// SLURM_NTASKS_PER_NODE as e.g. "2(x3)": read the leading number.
int env_int(const char* name, int fallback) {
  const char* text = env_or_null(name);
  if (!text) return fallback;
  const int value = std::atoi(text);
  return value >= 0 ? value : fallback;
}

// One launcher's variable names.
struct LauncherVars {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

const LauncherVars kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
};

struct HostPort {
  std::string host;
  int port;
};

HostPort parse_host_port(const std::string& text, const std::string& what) {
  const auto colon = text.rfind(':');
  LOOM_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < text.size(),
             "init_process_group: expected ", what, " as host:port, got '", text, "'");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = text.substr(colon + 1);
  const int port = parse_int("port", port_text.c_str());
  LOOM_CHECK(port > 0 && port < 65536, "init_process_group: port ", port, " in '", text,
             "' is outside 1..65535");
  return {host, port};
}

void check_rank(const RendezvousInfo& info) {
  LOOM_CHECK(info.world_size >= 1, "init_process_group: world_size must be >= 1, got ", info.world_size);
  LOOM_CHECK(info.rank >= 0 && info.rank < info.world_size, "init_process_group: rank ", info.rank,
             " is outside [0, world_size = ", info.world_size, ")");
}

}  // namespace

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

RendezvousInfo rank_from_environment(int rank, int world_size) {
  RendezvousInfo info;
  if (rank >= 0 && world_size >= 0) {
    info.rank = rank;
    info.world_size = world_size;
    info.source = "explicit";
    info.local_rank = env_int("LOCAL_RANK", 0);
    info.local_world_size = env_int("LOCAL_WORLD_SIZE", 1);
    check_rank(info);
    return info;
  }
  for (const auto& vars : kLaunchers) {
    if (!env_or_null(vars.rank) || !env_or_null(vars.world_size)) continue;
    info.rank = rank >= 0 ? rank : parse_int(vars.rank, env_or_null(vars.rank));
    info.world_size = world_size >= 0 ? world_size : parse_int(vars.world_size, env_or_null(vars.world_size));
    info.local_rank = env_int(vars.local_rank, 0);
    info.local_world_size = env_int(vars.local_world_size, 1);
    info.source = vars.source;
    check_rank(info);
    return info;
  }
  LOOM_FAIL("init_process_group: rank and world size are not known: pass InitOptions{.rank, .world_size} "
            "or start the program with a launcher (loomrun / torchrun set RANK and WORLD_SIZE; Slurm sets "
            "SLURM_PROCID and SLURM_NTASKS; mpirun sets OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE)",
            rank >= 0 ? "" : "; rank is unset", world_size >= 0 ? "" : "; world_size is unset");
}

RendezvousInfo rendezvous(const std::string& init_method, int rank, int world_size,
                          std::chrono::milliseconds timeout) {
  const std::string env_scheme = "env://";
  const std::string tcp_scheme = "tcp://";
  const std::string file_scheme = "file://";
  RendezvousInfo info = rank_from_environment(rank, world_size);
  if (init_method.empty() || init_method == env_scheme) {
    const char* addr = env_or_null("MASTER_ADDR");
    const char* port = env_or_null("MASTER_PORT");
    std::vector<std::string> missing;
    if (!addr) missing.push_back("MASTER_ADDR");
    if (!port) missing.push_back("MASTER_PORT");
    LOOM_CHECK(missing.empty(), "init_process_group(env://): environment variable",
               missing.size() > 1 ? "s " : " ", missing.front(), missing.size() > 1 ? " and " + missing.back() : "",
               missing.size() > 1 ? " are" : " is",
               " not set (loomrun and torchrun set them; under Slurm or mpirun export MASTER_ADDR=<first "
               "host> MASTER_PORT=<free port>)");
    const HostPort master = parse_host_port(std::string(addr) + ":" + port, "MASTER_ADDR:MASTER_PORT");
    TCPStoreOptions options;
    options.world_size = info.world_size;
    options.is_master = info.rank == 0;
    options.timeout = timeout;
    info.store = std::make_shared<TCPStore>(master.host, master.port, options);
    info.master_host = master.host;
  } else if (init_method.compare(0, tcp_scheme.size(), tcp_scheme) == 0) {
    const HostPort master = parse_host_port(init_method.substr(tcp_scheme.size()), "the tcp:// address");
    TCPStoreOptions options;
    options.world_size = info.world_size;
    options.is_master = info.rank == 0;
    options.timeout = timeout;
    info.store = std::make_shared<TCPStore>(master.host, master.port, options);
    info.master_host = master.host;
  } else if (init_method.compare(0, file_scheme.size(), file_scheme) == 0) {
    const std::string path = init_method.substr(file_scheme.size());
    LOOM_CHECK(!path.empty() && path.front() == '/', "init_process_group: expected file:///absolute/path, got '",
               init_method, "'");
    info.store = std::make_shared<FileStore>(path, info.world_size);
  } else {
    LOOM_FAIL("init_process_group: unknown init_method '", init_method,
              "'; expected env://, tcp://host:port or file:///path");
  }
  info.store->set_timeout(timeout);
  return info;
}

std::string local_address_towards(const std::string& host) {
  const std::string loopback = "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (host.empty() || getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return loopback;
  std::string result = loopback;
  const auto* target = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  const bool is_loopback = (ntohl(target->sin_addr.s_addr) >> 24) == 127;
  const int fd = is_loopback ? -1 : socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET_ADDRSTRLEN] = {};
      if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text))) result = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return result;
}

}  // namespace distributed
}  // namespace loom
