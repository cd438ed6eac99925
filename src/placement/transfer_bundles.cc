#include "placement/transfer_bundles.h"

#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"

namespace distflow {
namespace {

// Tensors at least this large (when their shape is known) keep a call of
// their own, where the bulk port can carry them (bulk/bulk_transfer.h).
constexpr int64_t kLargeTensorBytes = int64_t{1} << 20;
// Past this much search work the rest of the step's transfers stay alone
// (a very large step: the pass must stay cheap next to placing it).
constexpr int64_t kMaxVisits = int64_t{50} << 20;

// The node name an input refers to ("^a", "a:1" -> "a").
std::string InputNode(const std::string& input) {
  size_t start = !input.empty() && input[0] == '^' ? 1 : 0;
  size_t colon = input.find(':', start);
  return input.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
}

bool KnownLarge(const proto::NodeDef& recv) {
  absl::StatusOr<PartialShape> shape = GetAttrShape(recv, "shape");
  absl::StatusOr<DataType> dtype = GetAttrType(recv, "tensor_type");
  if (!shape.ok() || !dtype.ok() || !shape->IsFullyDefined()) return false;
  int64_t bytes = static_cast<int64_t>(DataTypeSize(*dtype));
  for (int i = 0; i < shape->rank(); ++i) {
    bytes *= shape->dim(i);
    if (bytes >= kLargeTensorBytes) return true;
  }
  return bytes >= kLargeTensorBytes;
}

class DepGraph {
 public:
  int Add() {
    out_.emplace_back();
    seen_.push_back(0);
    return static_cast<int>(out_.size()) - 1;
  }
  void Edge(int from, int to) { out_[static_cast<size_t>(from)].push_back(to); }
  size_t size() const { return out_.size(); }
  const std::vector<int>& Out(int n) const { return out_[static_cast<size_t>(n)]; }
  // Whether `to` is reachable from `from`; counts the nodes it visits.
  bool Reaches(int from, int to, int64_t* visits) {
    ++stamp_;
    std::vector<int> stack = {from};
    seen_[static_cast<size_t>(from)] = stamp_;
    while (!stack.empty()) {
      int n = stack.back();
      stack.pop_back();
      ++*visits;
      if (n == to) return true;
      for (int m : out_[static_cast<size_t>(n)]) {
        if (seen_[static_cast<size_t>(m)] == stamp_) continue;
        seen_[static_cast<size_t>(m)] = stamp_;
        stack.push_back(m);
      }
    }
    return false;
  }

 private:
  std::vector<std::vector<int>> out_;
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
};

struct Transfer {
  int send = -1, recv = -1;
  proto::NodeDef* recv_def = nullptr;
  std::string key, group;  // group: sending task and receiving device
  std::string from_task, to_task;
  std::vector<int> recv_inputs;  // what the _Recv node itself waits for (control inputs)
  bool large = false;            // of a known shape, 1 MiB or more: never bundled
};

struct Bundle {
  std::string group;
  int node = -1;
  std::vector<Transfer*> members;
  bool pushing = false, pushed = false;  // its fetch carries a push; it rides with one
  Bundle* fetch = nullptr;               // a riding bundle's: the bundle whose fetch carries it
};

// Pairs bundles that go opposite ways between two tasks: a bundle `b` that
// task A sends task W rides with A's fetch of a bundle `g` from W (a push,
// Rendezvous::RecvBundlePushingAsync), so W makes no call for it. Only where
// `g` depends on `b` anyway (W cannot send `g` before `b` arrives), so the
// fetch leaving once `b` is sent delays nothing, and only where nothing
// that a receive of `g` itself waits for depends on `b` (the fetch starts
// from such a receive). A bundle is in at most one pair.
void PairPushes(DepGraph& g, std::vector<Bundle>& bundles, int64_t* visits) {
  for (Bundle& fetch : bundles) {
    if (fetch.pushed || fetch.pushing) continue;
    const Transfer& f = *fetch.members.front();
    for (Bundle& ride : bundles) {
      if (&ride == &fetch || ride.pushed || ride.pushing || *visits > kMaxVisits) continue;
      const Transfer& r = *ride.members.front();
      if (r.from_task != f.to_task || r.to_task != f.from_task) continue;
      if (!g.Reaches(ride.node, fetch.node, visits)) continue;
      bool starts_after = false;
      for (const Transfer* m : fetch.members)
        for (int in : m->recv_inputs) starts_after = starts_after || g.Reaches(ride.node, in, visits);
      if (starts_after) continue;
      fetch.pushing = true;
      ride.pushed = true;
      ride.fetch = &fetch;
      std::vector<std::string> keys, push;
      for (const Transfer* m : fetch.members) keys.push_back(m->key);
      for (const Transfer* m : ride.members) push.push_back(m->key);
      for (Transfer* m : fetch.members) {
        SetAttrStringList(m->recv_def, "bundle", keys);
        SetAttrStringList(m->recv_def, "push", push);
      }
      // (A pushed receive keeps its `bundle` attr, unused, for a push undone
      // by MarkPrefetchableReads.)
      for (Transfer* m : ride.members) SetAttrBool(m->recv_def, "pushed", true);
      break;
    }
  }
}

// A large tensor of a known shape keeps a call of its own, but it may ride
// with a fetch that carries a push of its sending task's tensors to the
// same partition (as a bulk ticket: its bytes still take the bulk port) if
// that fetch's bundle needs it anyway, and joining the riding bundle keeps
// the step free of deadlocks (as a member joining a bundle must). The
// worker's largest variable read then rides with the ps's fetch of the
// gradients computed from it.
void PushLargeTransfers(DepGraph& g, std::vector<Bundle>& bundles, const std::vector<Transfer*>& large,
                        int64_t* visits) {
  for (Transfer* t : large) {
    for (Bundle& ride : bundles) {
      if (!ride.pushed || ride.fetch == nullptr || ride.group != t->group || *visits > kMaxVisits) continue;
      const Bundle& fetch = *ride.fetch;
      if (!g.Reaches(t->recv, fetch.node, visits)) continue;  // the fetch would wait for what it does not need
      if (g.Reaches(ride.node, t->send, visits) || g.Reaches(t->recv, ride.node, visits)) continue;
      bool starts_after = false;
      for (const Transfer* m : fetch.members)
        for (int in : m->recv_inputs) starts_after = starts_after || g.Reaches(t->send, in, visits);
      if (starts_after) continue;
      g.Edge(t->send, ride.node);
      g.Edge(ride.node, t->recv);
      ride.members.push_back(t);
      SetAttrBool(t->recv_def, "pushed", true);
      for (Transfer* m : fetch.members) {
        absl::StatusOr<std::vector<std::string>> push = GetAttrStringList(*m->recv_def, "push");
        std::vector<std::string> keys = push.ok() ? *push : std::vector<std::string>{};
        keys.push_back(t->key);
        SetAttrStringList(m->recv_def, "push", keys);
      }
      break;
    }
  }
}

}  // namespace

void BundleTransfers(std::map<std::string, Partition>* parts) {
  DepGraph g;
  absl::flat_hash_map<std::string, int> ids;  // device + "\n" + node name
  auto id_of = [&](const std::string& device, const std::string& name) {
    auto [it, added] = ids.try_emplace(absl::StrCat(device, "\n", name), 0);
    if (added) it->second = g.Add();
    return it->second;
  };
  absl::flat_hash_map<std::string, int> sends;  // key -> _Send
  std::vector<Transfer> transfers;
  for (auto& [device, part] : *parts) {
    for (proto::NodeDef& n : *part.graph.mutable_node()) {
      const int self = id_of(device, n.name());
      for (const std::string& in : n.input()) g.Edge(id_of(device, InputNode(in)), self);
      if (n.op() != "_Send" && n.op() != "_Recv") continue;
      absl::StatusOr<std::string> key = GetAttrString(n, "key");
      if (!key.ok()) continue;
      if (n.op() == "_Send") {
        sends[*key] = self;
        continue;
      }
      absl::StatusOr<std::string> from = GetAttrString(n, "send_task");
      if (!from.ok() || *from == part.task) continue;
      Transfer t;
      t.large = KnownLarge(n);
      t.recv = self;
      t.recv_def = &n;
      t.key = *key;
      t.group = absl::StrCat(*from, "\n", device);
      t.from_task = *from;
      t.to_task = part.task;
      for (const std::string& in : n.input()) t.recv_inputs.push_back(id_of(device, InputNode(in)));
      transfers.push_back(std::move(t));
    }
  }
  for (Transfer& t : transfers) {
    auto it = sends.find(t.key);
    if (it != sends.end()) t.send = it->second;
  }
  // Every transfer's _Send precedes its _Recv (the original crossing).
  for (const Transfer& t : transfers)
    if (t.send >= 0) g.Edge(t.send, t.recv);
  // Dependency order (Kahn); a cyclic graph (never made by the partitioner)
  // is left as it is.
  std::vector<int> indegree(g.size(), 0), order(g.size(), -1);
  for (size_t n = 0; n < g.size(); ++n)
    for (int m : g.Out(static_cast<int>(n))) ++indegree[static_cast<size_t>(m)];
  std::deque<int> ready;
  for (size_t n = 0; n < g.size(); ++n)
    if (indegree[n] == 0) ready.push_back(static_cast<int>(n));
  int next = 0;
  while (!ready.empty()) {
    int n = ready.front();
    ready.pop_front();
    order[static_cast<size_t>(n)] = next++;
    for (int m : g.Out(n))
      if (--indegree[static_cast<size_t>(m)] == 0) ready.push_back(m);
  }
  if (next != static_cast<int>(g.size())) return;
  std::vector<Transfer*> todo, large;
  for (Transfer& t : transfers)
    if (t.send >= 0) (t.large ? large : todo).push_back(&t);
  std::stable_sort(todo.begin(), todo.end(), [&](const Transfer* a, const Transfer* b) {
    return order[static_cast<size_t>(a->send)] < order[static_cast<size_t>(b->send)];
  });
  std::vector<Bundle> bundles;
  int64_t visits = 0;
  for (Transfer* t : todo) {
    Bundle* joined = nullptr;
    for (Bundle& b : bundles) {
      if (b.group != t->group || visits > kMaxVisits) continue;
      // Joining adds send -> bundle -> recv: a cycle if the bundle already
      // leads to this tensor's producer, or this tensor's consumers lead to
      // a member's producer.
      if (g.Reaches(b.node, t->send, &visits) || g.Reaches(t->recv, b.node, &visits)) continue;
      joined = &b;
      break;
    }
    if (joined == nullptr) {
      bundles.push_back(Bundle{t->group, g.Add(), {}});
      joined = &bundles.back();
    }
    g.Edge(t->send, joined->node);
    g.Edge(joined->node, t->recv);
    joined->members.push_back(t);
  }
  for (const Bundle& b : bundles) {
    if (b.members.size() < 2) continue;
    std::vector<std::string> keys;
    for (const Transfer* t : b.members) keys.push_back(t->key);
    for (Transfer* t : b.members) SetAttrStringList(t->recv_def, "bundle", keys);
  }
  PairPushes(g, bundles, &visits);
  PushLargeTransfers(g, bundles, large, &visits);
}

}  // namespace distflow
