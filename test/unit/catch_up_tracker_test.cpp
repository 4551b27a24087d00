// catch_up_tracker without a server: the phases of a catch-up subscription,
// what happens to live events in each, the buffer during a replay and its
// bounds, gaps, counter resets, re-anchors in either order, and the cursor.
#include "feeds/catch_up_tracker.hpp"
#include "support/sync_points.hpp"

#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

using thoonk::feed_event;
using thoonk::detail::catch_up_tracker;
using thoonk::detail::sync_point;
using thoonk::test::sync_at;
using phase = catch_up_tracker::phase;
using live = catch_up_tracker::live_action;
using marker = catch_up_tracker::marker_action;
using synced = catch_up_tracker::sync_action;
using round_end = catch_up_tracker::round_end;

namespace {

feed_event pub(std::string_view id, std::string_view item) {
  feed_event ev;
  ev.kind = feed_event::publish;
  ev.id = id;
  ev.item = item;
  return ev;
}

feed_event retract(std::string_view id) {
  feed_event ev;
  ev.kind = feed_event::retract;
  ev.id = id;
  return ev;
}

// A tracker that completed its first sync point at `seq` and is live.
catch_up_tracker live_at(std::uint64_t seq, catch_up_tracker::options o) {
  catch_up_tracker t("7", o);
  t.start_round();
  auto req = t.next_sync();
  REQUIRE(t.on_marker(req.marker) == marker::buffering);
  REQUIRE(t.on_sync(sync_at(seq), true) == synced::initial);
  REQUIRE(t.replay_done());
  REQUIRE(t.finish_round() == round_end::initial);
  REQUIRE_FALSE(t.next_buffered());
  t.end_flush();
  REQUIRE(t.current_phase() == phase::live);
  return t;
}

catch_up_tracker live_at(std::uint64_t seq) { return live_at(seq, catch_up_tracker::options()); }

// Starts a round after a gap; returns its marker.
std::string gap_and_round(catch_up_tracker& t) {
  t.on_disconnected();
  REQUIRE(t.current_phase() == phase::gap);
  REQUIRE(t.on_connected());
  t.start_round();
  auto req = t.next_sync();
  REQUIRE_FALSE(req.initial);
  return req.marker;
}

}  // namespace

TEST_CASE("catch_up_tracker: the first sync drops events before its marker and buffers those after",
          "[unit][catch_up]") {
  catch_up_tracker t("7");
  CHECK(t.current_phase() == phase::starting);
  CHECK(t.on_live(pub("x", "X")) == live::dropped);  // not ours yet
  CHECK_FALSE(t.on_connected());                     // registering: no round on connect

  auto r = t.start_round();
  CHECK(t.is_round(r));
  CHECK(t.current_phase() == phase::syncing);
  auto req = t.next_sync();
  CHECK(req.initial);
  CHECK(req.from == 0);
  CHECK_FALSE(req.window_from);

  CHECK(t.on_live(pub("a", "A")) == live::dropped);  // covered by the read
  CHECK(t.on_marker("7:999:1") == marker::ignored);  // someone else's marker
  CHECK(t.on_marker(req.marker) == marker::buffering);
  CHECK(t.on_live(pub("b", "B")) == live::buffered);
  CHECK(t.on_live(retract("a")) == live::buffered);
  CHECK(t.buffered() == 2);

  CHECK(t.on_sync(sync_at(40), true) == synced::initial);
  CHECK(t.has_cursor());
  CHECK(t.cursor() == 40);
  CHECK(t.replay_done());  // the marker was seen: finish now
  CHECK(t.finish_round() == round_end::initial);
  CHECK(t.current_phase() == phase::live);
  CHECK(t.ledger().anchor().seq == 40);

  auto e1 = t.next_buffered();
  REQUIRE(e1);
  CHECK(e1->id == "b");
  CHECK(t.on_live(e1->view("f")) == live::deliver);
  auto e2 = t.next_buffered();
  REQUIRE(e2);
  CHECK(e2->kind == feed_event::retract);
  CHECK(t.on_live(e2->view("f")) == live::deliver);
  CHECK_FALSE(t.next_buffered());
  t.end_flush();
  CHECK(t.cursor() == 41);  // one publish after the sync point
}

TEST_CASE("catch_up_tracker: the sync reply may come before its marker", "[unit][catch_up]") {
  catch_up_tracker t("7");
  t.start_round();
  auto req = t.next_sync();
  CHECK(t.on_sync(sync_at(5), true) == synced::initial);
  CHECK_FALSE(t.replay_done());                      // wait for the marker
  CHECK(t.on_live(pub("a", "A")) == live::dropped);  // still before the marker
  CHECK(t.current_phase() == phase::syncing);
  CHECK(t.on_marker(req.marker) == marker::finish_round);
  CHECK(t.finish_round() == round_end::initial);
  CHECK(t.on_live(pub("b", "B")) == live::deliver);
  CHECK(t.cursor() == 6);
}

TEST_CASE(
    "catch_up_tracker: a replay after a gap, then the buffer flushed in order without duplicates",
    "[unit][catch_up]") {
  auto t = live_at(10);
  CHECK(t.on_live(pub("a", "A1")) == live::deliver);
  CHECK(t.cursor() == 11);

  t.on_disconnected();
  CHECK(t.on_live(pub("z", "Z")) == live::dropped);  // in the gap: not ours
  CHECK(t.on_connected());
  t.start_round();
  auto req = t.next_sync();
  CHECK(req.from == 10);  // the anchor, not the counted cursor
  CHECK(t.on_marker(req.marker) == marker::buffering);
  CHECK(t.on_live(pub("b", "B1")) == live::buffered);  // the replay will read B1 too
  CHECK(t.on_live(pub("c", "C1")) == live::buffered);
  CHECK(t.on_live(pub("b", "B2")) == live::buffered);

  REQUIRE(t.on_sync(sync_at(15), false) == synced::replay);
  CHECK_FALSE(t.take_change("a", "A1"));  // delivered live before the gap
  CHECK(t.take_change("b", "B1"));
  CHECK(t.take_retraction("d", 12));
  CHECK(t.replay_done());
  CHECK(t.cursor() == 15);
  REQUIRE(t.finish_round() == round_end::caught_up);
  CHECK(t.info().from == 11);
  CHECK(t.info().to == 15);
  CHECK(t.info().items == 1);
  CHECK(t.info().retractions == 1);
  CHECK_FALSE(t.info().retractions_complete);
  CHECK_FALSE(t.info().counter_reset);

  // b/B1 was shown by the replay: skipped (but counted); c and b/B2 come.
  auto e = t.next_buffered();
  REQUIRE(e);
  CHECK(e->id == "c");
  CHECK(t.on_live(e->view("f")) == live::deliver);
  e = t.next_buffered();
  REQUIRE(e);
  CHECK(e->id == "b");
  CHECK(e->item == "B2");
  CHECK(t.on_live(e->view("f")) == live::deliver);
  CHECK_FALSE(t.next_buffered());
  t.end_flush();
  CHECK(t.cursor() == 18);
  CHECK(t.ledger().anchor().seq == 15);
}

TEST_CASE("catch_up_tracker: a full buffer is dropped and the round runs again",
          "[unit][catch_up]") {
  catch_up_tracker::options o;
  o.buffer_max_events = 2;
  auto t = live_at(1, o);
  auto m = gap_and_round(t);
  CHECK(t.on_marker(m) == marker::buffering);
  CHECK(t.on_live(pub("a", "A")) == live::buffered);
  CHECK(t.on_live(pub("b", "B")) == live::buffered);
  CHECK(t.on_live(pub("c", "C")) == live::dropped);  // over the bound: all dropped
  CHECK(t.buffered() == 0);
  CHECK(t.buffered_bytes() == 0);
  CHECK(t.on_live(pub("d", "D")) == live::dropped);  // and no more kept this round
  REQUIRE(t.on_sync(sync_at(3), true) == synced::replay);
  CHECK(t.replay_done());
  CHECK(t.finish_round() == round_end::restart);
  CHECK(t.current_phase() == phase::buffering);  // not live: nothing delivered

  auto r = t.start_round();
  CHECK(t.is_round(r));
  CHECK(t.current_phase() == phase::syncing);
  auto req = t.next_sync();
  CHECK(t.on_marker(req.marker) == marker::buffering);
  CHECK(t.on_live(pub("e", "E")) == live::buffered);  // buffering again
}

TEST_CASE("catch_up_tracker: the byte bound of the buffer", "[unit][catch_up]") {
  catch_up_tracker::options o;
  o.buffer_max_bytes = 200;
  auto t = live_at(1, o);
  CHECK(t.on_marker(gap_and_round(t)) == marker::buffering);
  CHECK(t.on_live(pub("a", std::string_view("0123456789"))) == live::buffered);
  CHECK(t.buffered_bytes() > 0);
  const std::string big(300, 'x');
  CHECK(t.on_live(pub("b", big)) == live::dropped);
  CHECK(t.buffered() == 0);
}

TEST_CASE("catch_up_tracker: a gap during buffering abandons the round", "[unit][catch_up]") {
  auto t = live_at(1);
  t.on_disconnected();
  auto r1 = t.start_round();
  auto m1 = t.next_sync().marker;
  CHECK(t.on_marker(m1) == marker::buffering);
  CHECK(t.on_live(pub("a", "A")) == live::buffered);

  t.on_disconnected();
  CHECK_FALSE(t.is_round(r1));  // its reads are ignored by the caller
  CHECK(t.current_phase() == phase::gap);
  CHECK(t.buffered() == 0);
  CHECK(t.on_live(pub("b", "B")) == live::dropped);

  CHECK(t.on_connected());
  auto r2 = t.start_round();
  CHECK(t.is_round(r2));
  auto m2 = t.next_sync().marker;
  CHECK(m2 != m1);
  CHECK(t.on_marker(m1) == marker::ignored);  // the old round's marker
  CHECK(t.on_marker(m2) == marker::buffering);
}

TEST_CASE("catch_up_tracker: a retried sync read has a new marker", "[unit][catch_up]") {
  auto t = live_at(1);
  gap_and_round(t);
  auto m1 = t.next_sync().marker;
  t.retry_sync();
  auto m2 = t.next_sync().marker;
  CHECK(m1 != m2);
  CHECK(t.on_marker(m1) == marker::ignored);
  CHECK(t.on_marker(m2) == marker::buffering);
}

TEST_CASE("catch_up_tracker: a counter that went backwards replays the feed from its start",
          "[unit][catch_up]") {
  catch_up_tracker::options o;
  o.score_window = true;
  auto t = live_at(20, o);
  CHECK(t.next_sync().window_from == std::nullopt);  // the initial sync had no window
  auto m = gap_and_round(t);
  CHECK(t.on_sync(sync_at(5), true) == synced::counter_reset);
  CHECK(t.cursor() == 0);
  CHECK(t.on_marker(m) == marker::ignored);  // that attempt is over
  auto req = t.next_sync();
  CHECK(req.from == 0);
  REQUIRE(req.window_from);
  CHECK(*req.window_from == "-inf");
  CHECK(t.on_marker(req.marker) == marker::buffering);
  REQUIRE(t.on_sync(sync_at(5), true) == synced::replay);
  CHECK(t.take_window_item("a", "100", "A"));
  CHECK(t.replay_done());
  CHECK(t.finish_round() == round_end::caught_up);
  CHECK(t.info().counter_reset);
  CHECK(t.info().from == 20);
  CHECK(t.info().to == 5);
  CHECK(t.info().items == 1);
  CHECK(t.cursor() == 5);
}

TEST_CASE("catch_up_tracker: a feed that is gone fails the first sync, later it is reported",
          "[unit][catch_up]") {
  catch_up_tracker first("7");
  first.start_round();
  first.next_sync();
  CHECK_FALSE(first.fail_round(thoonk::error::feed_not_found));  // subscribe() fails

  auto t = live_at(9);
  CHECK(t.on_marker(gap_and_round(t)) == marker::buffering);
  CHECK(t.on_live(pub("a", "A")) == live::buffered);
  CHECK(t.fail_round(thoonk::error::feed_not_found));
  CHECK(t.info().error == thoonk::error::feed_not_found);
  CHECK(t.info().from == 9);
  CHECK(t.info().to == 9);
  CHECK(t.current_phase() == phase::live);
  CHECK(t.buffered() == 0);
  CHECK(t.on_live(pub("b", "B")) == live::deliver);
}

TEST_CASE("catch_up_tracker: resuming from a saved cursor replays from it", "[unit][catch_up]") {
  catch_up_tracker t("7");
  t.resume_from(33);
  CHECK(t.has_cursor());
  CHECK(t.cursor() == 33);
  t.start_round();
  auto req = t.next_sync();
  CHECK_FALSE(req.initial);
  CHECK(req.from == 33);
  CHECK(t.on_marker(req.marker) == marker::buffering);
  REQUIRE(t.on_sync(sync_at(35), true) == synced::replay);
  CHECK(t.take_change("a", "A"));
  CHECK(t.replay_done());
  CHECK(t.finish_round() == round_end::caught_up);  // reported: not the initial sync
  CHECK(t.info().from == 33);
  CHECK(t.cursor() == 35);
}

namespace {

// Delivers live publishes until the tracker asks for a re-anchor, which it
// does once the ledger holds reanchor_after events since the anchor.
void until_reanchor(catch_up_tracker& t) {
  const auto limit = thoonk::detail::catch_up_ledger::reanchor_after;
  for (std::size_t i = t.ledger().size(); i < limit; ++i) {
    const std::string id = "k" + std::to_string(i);
    auto a = t.on_live(pub(id, "v"));
    REQUIRE(a == (i + 1 < limit ? live::deliver : live::deliver_and_reanchor));
  }
  REQUIRE(t.reanchoring());
}

}  // namespace

TEST_CASE("catch_up_tracker: a re-anchor whose marker comes before its reply", "[unit][catch_up]") {
  auto t = live_at(100);
  until_reanchor(t);
  CHECK(t.cursor() == 100 + thoonk::detail::catch_up_ledger::reanchor_after);
  auto req = t.current_reanchor();
  CHECK(req.from == 100);
  CHECK(t.on_marker(req.marker) == marker::split);
  CHECK(t.ledger().split_pending());
  CHECK(t.on_live(pub("late", "L")) == live::deliver);  // after the marker
  t.on_reanchor_read(req.generation, sync_at(2000));
  CHECK_FALSE(t.reanchoring());
  CHECK(t.ledger().anchor().seq == 2000);
  CHECK(t.cursor() == 2001);  // the sync point plus what came after its marker
  CHECK(t.ledger().size() == 1);
}

TEST_CASE("catch_up_tracker: a re-anchor whose reply comes before its marker", "[unit][catch_up]") {
  auto t = live_at(100);
  until_reanchor(t);
  auto req = t.current_reanchor();
  t.on_reanchor_read(req.generation, sync_at(1500));
  CHECK(t.reanchoring());  // waits for the marker
  CHECK(t.on_live(pub("before", "B")) == live::deliver);
  CHECK(t.on_marker(req.marker) == marker::reanchored);
  CHECK_FALSE(t.reanchoring());
  CHECK(t.ledger().anchor().seq == 1500);
  CHECK(t.cursor() == 1500);
  CHECK(t.ledger().size() == 0);
}

TEST_CASE("catch_up_tracker: a re-anchor cut by a gap keeps the old anchor", "[unit][catch_up]") {
  auto t = live_at(100);
  CHECK(t.on_live(pub("a", "A1")) == live::deliver);
  until_reanchor(t);
  auto req = t.current_reanchor();
  CHECK(t.on_marker(req.marker) == marker::split);
  t.on_disconnected();  // unsplit: nothing delivered is forgotten
  CHECK_FALSE(t.reanchoring());
  CHECK_FALSE(t.ledger().split_pending());
  t.on_reanchor_read(req.generation, sync_at(5000));  // a stale answer
  CHECK(t.ledger().anchor().seq == 100);

  t.start_round();
  auto sreq = t.next_sync();
  CHECK(sreq.from == 100);
  CHECK(t.on_marker(sreq.marker) == marker::buffering);
  REQUIRE(t.on_sync(sync_at(2000), true) == synced::replay);
  CHECK_FALSE(t.take_change("a", "A1"));  // still known from before the split
}

TEST_CASE("catch_up_tracker: a failed re-anchor is not retried on the next event",
          "[unit][catch_up]") {
  auto t = live_at(100);
  until_reanchor(t);
  auto req = t.current_reanchor();
  t.on_reanchor_read(req.generation, std::nullopt);
  CHECK_FALSE(t.reanchoring());
  CHECK(t.on_marker(req.marker) == marker::ignored);
  std::size_t n = 1;
  while (t.on_live(pub("k", "v")) == live::deliver) ++n;
  CHECK(n == thoonk::detail::catch_up_ledger::reanchor_after);
  CHECK(t.reanchoring());
  CHECK(t.current_reanchor().generation != req.generation);
}

TEST_CASE("catch_up_tracker: late messages of changes a replay showed are skipped",
          "[unit][catch_up]") {
  catch_up_tracker::options o;
  o.score_window = true;
  auto t = live_at(10, o);
  auto m = gap_and_round(t);
  CHECK(t.on_sync(sync_at(10), true) == synced::replay);
  CHECK(t.take_window_item("w", "60", "W"));
  CHECK_FALSE(t.replay_done());
  CHECK(t.on_marker(m) == marker::finish_round);
  CHECK(t.finish_round() == round_end::caught_up);
  t.end_flush();
  CHECK(t.on_live(pub("w", "W")) == live::late_duplicate);
  CHECK(t.cursor() == 10);
  CHECK(t.on_live(pub("w", "W")) == live::deliver);  // only the first is compared
}

TEST_CASE("catch_up_tracker: stop abandons everything", "[unit][catch_up]") {
  auto t = live_at(1);
  auto m = gap_and_round(t);
  auto r = t.start_round();
  t.stop();
  CHECK_FALSE(t.is_round(r));
  CHECK_FALSE(t.on_connected());
  CHECK(t.on_marker(m) == marker::ignored);
  CHECK_FALSE(t.next_buffered());
}
