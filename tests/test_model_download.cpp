// Model lookup and download against a local HTTP server that the test runs on 127.0.0.1 (a small socket
// server thread serving the shared checkpoint's bytes, a truncated copy, a copy that lies about its length,
// and a 404), with the user cache pointed at a scratch folder.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "tests/scoped_env.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using namespace lab;

namespace {

const fs::path kModel = fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Route {
  int status = 200;
  std::string body;
  size_t declared_length =
      0;  // Content-Length sent; may exceed body.size() (the connection then closes early)
};

// One-connection-at-a-time HTTP/1.0 server on an ephemeral port of 127.0.0.1.
class LocalHttpServer {
 public:
  explicit LocalHttpServer(std::map<std::string, Route> routes) : routes_(std::move(routes)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener_, 8) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LocalHttpServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) continue;
      ++requests_;
      answer(client);
      ::close(client);
    }
  }

  void answer(int client) {
    std::string request;
    char buffer[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      if (n <= 0) return;
      request.append(buffer, size_t(n));
    }
    const size_t start = request.find(' ') + 1;
    const std::string path = request.substr(start, request.find(' ', start) - start);
    const auto it = routes_.find(path);
    const Route route = it != routes_.end() ? it->second : Route{404, "not found", 9};
    const std::string head = "HTTP/1.0 " + std::to_string(route.status) +
                             (route.status == 200 ? " OK" : " Error") +
                             "\r\nContent-Length: " + std::to_string(route.declared_length) +
                             "\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
    send_all(client, head);
    send_all(client, route.body);
  }

  static void send_all(int client, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(client, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += size_t(n);
    }
  }

  std::map<std::string, Route> routes_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

size_t files_under(const fs::path& dir) {
  size_t n = 0;
  if (fs::exists(dir))
    for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

// The search of a machine with neither --model, $LAB_MODEL nor shared assets, downloading from `url`.
ModelSearch download_only_search(const std::string& url) {
  ModelSearch search = default_model_search("");
  search.env_path.clear();
  search.assets_dirs.clear();
  search.url = url;
  search.show_progress = false;
  return search;
}

}  // namespace

TEST_CASE("model lookup reads the environment and the order of the sources", "[detect][download]") {
  test::ScratchDir dir("model-lookup");
  const test::ScopedEnv cache("XDG_CACHE_HOME", dir.path.string());
  const test::ScopedEnv url("LAB_MODEL_URL", "http://127.0.0.1:9/yolo26n.pt");
  const test::ScopedEnv model("LAB_MODEL", (dir.path / "absent.pt").string());
  const ModelSearch search = default_model_search("");
  CHECK(search.cache_file == dir.path / "yolo26-kernel-lab" / "yolo26n.pt");
  CHECK(search.url == "http://127.0.0.1:9/yolo26n.pt");
  CHECK(search.env_path == (dir.path / "absent.pt").string());
  REQUIRE_FALSE(search.assets_dirs.empty());
  CHECK(search.assets_dirs.front() == fs::path(LAB_ASSETS_DIR));
  CHECK_THROWS_WITH(locate_model(search), Catch::Contains("$LAB_MODEL") && Catch::Contains("absent.pt"));
  CHECK_THROWS_WITH(locate_model(default_model_search((dir.path / "none.pt").string())),
                    Catch::Contains("--model") && Catch::Contains("none.pt"));

  test::write_file(dir.path / "mine.pt", "x");
  CHECK(locate_model(default_model_search((dir.path / "mine.pt").string())).origin == "--model");
  ModelSearch from_env = search;
  from_env.env_path = (dir.path / "mine.pt").string();
  CHECK(locate_model(from_env).origin == "$LAB_MODEL");
  if (fs::exists(kModel)) {
    ModelSearch from_assets = search;
    from_assets.env_path.clear();
    const ModelLocation found = locate_model(from_assets);
    CHECK(found.origin == "shared assets");
    CHECK(fs::equivalent(found.path, kModel));
  }
  ModelSearch from_cache = download_only_search("http://127.0.0.1:9/unused");
  fs::create_directories(from_cache.cache_file.parent_path());
  test::write_file(from_cache.cache_file, "cached");
  CHECK(locate_model(from_cache).origin == "user cache");
}

TEST_CASE("the model downloads into the user cache and is found there afterwards", "[detect][download]") {
  if (!fs::exists(kModel)) {
    WARN("skipped: shared assets not found at " << LAB_ASSETS_DIR);
    return;
  }
  const std::string bytes = read_bytes(kModel);
  LocalHttpServer server({{"/yolo26n.pt", {200, bytes, bytes.size()}}});
  test::ScratchDir dir("model-download");
  const test::ScopedEnv cache("XDG_CACHE_HOME", dir.path.string());
  const ModelSearch search = download_only_search(server.url("/yolo26n.pt"));

  const ModelLocation downloaded = locate_model(search);
  CHECK(downloaded.origin == "downloaded from " + server.url("/yolo26n.pt"));
  CHECK(downloaded.path == dir.path / "yolo26-kernel-lab" / "yolo26n.pt");
  CHECK(read_bytes(downloaded.path) == bytes);
  CHECK(files_under(dir.path) == 1);  // no temporary left

  const ModelLocation cached = locate_model(search);
  CHECK(cached.origin == "user cache");
  CHECK(server.requests() == 1);
}

TEST_CASE("failed downloads are clear errors and leave nothing in the cache", "[detect][download]") {
  if (!fs::exists(kModel)) {
    WARN("skipped: shared assets not found at " << LAB_ASSETS_DIR);
    return;
  }
  const std::string bytes = read_bytes(kModel);
  const std::string half = bytes.substr(0, bytes.size() / 2);
  LocalHttpServer server({{"/truncated.pt", {200, half, half.size()}},   // a complete transfer of half a file
                          {"/cut-short.pt", {200, half, bytes.size()}},  // the connection drops mid-way
                          {"/garbage.pt", {200, "<html>hi</html>", 15}}});  // not a checkpoint at all
  test::ScratchDir dir("model-download-bad");
  const test::ScopedEnv cache("XDG_CACHE_HOME", dir.path.string());

  const std::vector<std::pair<std::string, std::string>> cases = {{"/missing.pt", "404"},
                                                                  {"/truncated.pt", "not a valid checkpoint"},
                                                                  {"/cut-short.pt", "failed"},
                                                                  {"/garbage.pt", "not a valid checkpoint"}};
  for (const auto& [path, message] : cases) {
    INFO(path);
    const ModelSearch search = download_only_search(server.url(path));
    try {
      locate_model(search);
      FAIL("no error");
    } catch (const RuntimeError& e) {
      CHECK_THAT(e.what(), Catch::Contains(server.url(path)) && Catch::Contains(message));
    }
    CHECK(files_under(dir.path) == 0);
  }
}
