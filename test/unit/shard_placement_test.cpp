// The subscriber's shard channels without I/O: where each SSUBSCRIBE goes,
// and what a MOVED, a server-side unsubscribe, a lost connection and a new
// slot map change.
#include "subscriber/shard_placement.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

using thoonk::detail::cluster_node;
using thoonk::detail::hash_slot;
using thoonk::detail::shard_placement;

namespace {

const cluster_node a{"127.0.0.1", 7001};
const cluster_node b{"127.0.0.1", 7002};
const cluster_node c{"127.0.0.1", 7003};

// A slot map for the test: every slot on `all`, except those listed.
struct fake_map {
  cluster_node all = a;
  std::map<std::uint16_t, cluster_node> moved;
  bool known = true;
  shard_placement::lookup lookup() const {
    return [this](std::uint16_t slot) -> std::optional<cluster_node> {
      if (!known) return std::nullopt;
      if (auto it = moved.find(slot); it != moved.end()) return it->second;
      return all;
    };
  }
};

const std::string orders = "feed.publish:{orders}";
const std::string marker = "thoonk.sync:u:{orders}";
const std::string users = "feed.publish:{users}";

}  // namespace

TEST_CASE("shard placement: channels go to the primary of their slot", "[unit][subscriber]") {
  fake_map m;
  m.moved[hash_slot("users")] = b;
  shard_placement p;
  CHECK(p.add(orders, m.lookup()) == a);
  CHECK(p.add(marker, m.lookup()) == a);  // same tag, same slot, same node
  CHECK(p.add(users, m.lookup()) == b);
  CHECK(p.nodes().size() == 2);
  CHECK_FALSE(p.any_lost());
  CHECK_FALSE(p.needs_work());  // all pending where they should be
  CHECK(p.on_confirmed(orders, a));
  CHECK_FALSE(p.on_confirmed(users, a));  // not where it was sent: not ours there
  CHECK(p.on_confirmed(users, b));
  CHECK(p.plan(m.lookup()).empty());
  // Dropped: SUNSUBSCRIBE where it was; the node stays while it holds others.
  CHECK(p.remove(users) == b);
  CHECK(p.nodes().size() == 1);
  CHECK_FALSE(p.remove(users));
}

TEST_CASE("shard placement: without a map, the default node, then MOVED", "[unit][subscriber]") {
  const cluster_node self{"", 0};
  shard_placement p(self);
  CHECK(p.add(orders, {}) == self);
  // The default node answers MOVED: the channel goes to the target at once.
  CHECK(p.on_moved(orders, self, b) == b);
  CHECK_FALSE(p.on_moved(orders, self, c));  // a second answer from the old node: ignored
  CHECK(p.node_of(orders) == b);
  CHECK(p.on_confirmed(orders, b));
  CHECK_FALSE(p.needs_work());
  // A MOVED for a confirmed channel is stale: ignored.
  CHECK_FALSE(p.on_moved(orders, b, c));
}

TEST_CASE("shard placement: a slot that migrates while subscribed", "[unit][subscriber]") {
  fake_map m;
  shard_placement p;
  p.add(orders, m.lookup());
  p.add(marker, m.lookup());
  p.add(users, m.lookup());
  for (auto* ch : {&orders, &marker, &users}) REQUIRE(p.on_confirmed(*ch, a));

  // The source node drops the slot's channels (sunsubscribe pushes): lost.
  CHECK(p.on_server_unsubscribed(orders, a));
  CHECK(p.on_server_unsubscribed(marker, a));
  CHECK_FALSE(p.on_server_unsubscribed(orders, a));  // already unsubscribed
  CHECK_FALSE(p.on_server_unsubscribed(users, b));   // not on that node
  CHECK(p.any_lost());
  CHECK(p.needs_work());

  // The map still says A (not read yet): sent to A again, which will
  // answer MOVED.
  auto plan = p.plan(m.lookup());
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].to == a);
  CHECK_FALSE(plan[0].unsubscribe_from);
  CHECK(p.on_moved(orders, a, b) == b);
  CHECK(p.on_moved(marker, a, b) == b);
  CHECK(p.on_confirmed(orders, b));
  CHECK(p.any_lost());  // the marker is not back yet
  CHECK(p.on_confirmed(marker, b));
  CHECK_FALSE(p.any_lost());
  CHECK_FALSE(p.needs_work());
  CHECK(p.nodes().size() == 2);  // users stays on A
}

TEST_CASE("shard placement: a new map moves subscribed channels", "[unit][subscriber]") {
  fake_map m;
  shard_placement p;
  p.add(orders, m.lookup());
  p.add(users, m.lookup());
  REQUIRE(p.on_confirmed(orders, a));
  REQUIRE(p.on_confirmed(users, a));
  m.moved[hash_slot("orders")] = c;
  auto plan = p.plan(m.lookup());
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].channel == orders);
  CHECK(plan[0].to == c);
  CHECK(plan[0].unsubscribe_from == a);  // still subscribed there: let it go
  CHECK(p.any_lost());
  CHECK(p.plan(m.lookup()).empty());  // pending at C: nothing more to send
  CHECK(p.on_confirmed(orders, c));
  CHECK_FALSE(p.any_lost());
  // A late confirmation from the old node is not ours.
  CHECK_FALSE(p.on_confirmed(orders, a));
}

TEST_CASE("shard placement: a lost connection and a failover", "[unit][subscriber]") {
  fake_map m;
  m.moved[hash_slot("users")] = b;
  shard_placement p;
  p.add(orders, m.lookup());
  p.add(users, m.lookup());
  REQUIRE(p.on_confirmed(orders, a));
  REQUIRE(p.on_confirmed(users, b));

  SECTION("the node comes back: its connection's setup subscribes again") {
    CHECK(p.on_node_lost(a));
    CHECK(p.any_lost());
    CHECK(p.needs_work());              // read the map meanwhile
    CHECK(p.plan(m.lookup()).empty());  // the map still says A: wait for it
    CHECK_FALSE(p.on_node_lost(a));     // a failed reconnect: nothing new is lost
    auto again = p.on_node_setup(a);
    REQUIRE(again.size() == 1);
    CHECK(again[0] == orders);
    CHECK(p.any_lost());                // until confirmed
    CHECK(p.plan(m.lookup()).empty());  // pending on its connection again: nothing to send
    CHECK(p.on_confirmed(orders, a));
    CHECK_FALSE(p.any_lost());
    CHECK_FALSE(p.needs_work());
  }
  SECTION("the replica C is promoted: the map moves the slot, the channel follows") {
    CHECK(p.on_node_lost(a));
    m.all = c;
    auto plan = p.plan(m.lookup());
    REQUIRE(plan.size() == 1);
    CHECK(plan[0].to == c);
    CHECK_FALSE(plan[0].unsubscribe_from);  // it was not subscribed any more
    CHECK(p.any_lost());                    // until C confirms
    auto nodes = p.nodes();
    CHECK(std::find(nodes.begin(), nodes.end(), a) == nodes.end());  // A's connection can go
    CHECK(p.on_confirmed(orders, c));
    CHECK_FALSE(p.any_lost());
    CHECK_FALSE(p.needs_work());
    CHECK(p.node_of(users) == b);
  }
  SECTION("a channel never confirmed is not lost, but waits for the map") {
    p.add(marker, m.lookup());
    p.remove(orders);
    CHECK_FALSE(p.on_node_lost(a));
    CHECK_FALSE(p.any_lost());
    CHECK(p.needs_work());
  }
}

TEST_CASE("shard placement: ASK, TRYAGAIN and CLUSTERDOWN try again later", "[unit][subscriber]") {
  fake_map m;
  shard_placement p;
  p.add(orders, m.lookup());
  p.on_retry(orders, b);  // not where it was sent: ignored
  CHECK_FALSE(p.needs_work());
  p.on_retry(orders, a);
  CHECK(p.needs_work());
  CHECK_FALSE(p.any_lost());  // never subscribed: nothing was missed
  m.known = false;            // no map: where it was
  auto plan = p.plan(m.lookup());
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].to == a);
  CHECK_FALSE(p.needs_work());
}
