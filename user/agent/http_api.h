// The agent's HTTP endpoints on cpp-httplib: profiles in Go's
// net/http/pprof shapes, /metrics, service discovery, flame graphs and the
// index page. Handlers run on the server's threads and reach the recording
// only through the Bridge.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/bridge.h"
#include "agent/fold_groups.h"
#include "agent/label_cache.h"
#include "base/result.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace allocscope {

class AgentServer;
class SharedResponses;

class HttpApi {
 public:
  // `labels` and `groups` are read inside bridge jobs only (the recording's
  // thread).
  HttpApi(const AgentConfig& config, Bridge& bridge, LabelCache& labels, FoldGroups& groups,
          std::string token);
  ~HttpApi();

  // Binds the address (errors before anything is attached), then serves
  // from a thread of its own until stop().
  Result<void> start(const std::string& host, int port);
  void stop();
  uint64_t requests() const { return requests_; }
  uint64_t errors() const { return errors_; }

 private:
  void handle(const httplib::Request& req, httplib::Response& res);
  void route(const httplib::Request& req, httplib::Response& res);
  void profile(const struct Addressed& a, bool heap, const httplib::Request& req, httplib::Response& res);
  void flamegraph(const struct Addressed& a, const httplib::Request& req, httplib::Response& res);
  void metrics(const struct Addressed& a, httplib::Response& res);
  void targets(const httplib::Request& req, httplib::Response& res);
  void index(httplib::Response& res);
  bool authorized(const httplib::Request& req) const;
  void error(httplib::Response& res, int status, const std::string& message);
  bool ran(Bridge::Job job, httplib::Response& res);

  const AgentConfig& config_;
  Bridge& bridge_;
  LabelCache& labels_;
  FoldGroups& groups_;
  std::string token_;
  std::string host_name_;
  std::unique_ptr<AgentServer> server_;
  std::unique_ptr<SharedResponses> shared_;
  std::thread thread_;
  std::atomic<uint64_t> requests_{0}, errors_{0}, queue_full_{0};
  std::atomic<unsigned> deltas_{0};
};

}  // namespace allocscope
