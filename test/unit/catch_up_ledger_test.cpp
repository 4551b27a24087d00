// catch_up_ledger without a server: what a replay delivers given what the
// application was given live since the anchor, re-anchoring in either order
// of marker and reply, and late messages of other contract clients.
#include "feeds/catch_up_ledger.hpp"
#include "support/sync_points.hpp"

#include <catch2/catch.hpp>

using thoonk::detail::catch_up_ledger;
using thoonk::detail::sync_point;
using thoonk::test::sync_at;

TEST_CASE("catch_up_ledger: a replay skips exactly what was delivered live since the anchor",
          "[unit][catch_up]") {
  catch_up_ledger l;
  l.anchor_at(sync_at(10));
  l.delivered_publish("a", "A1");
  l.delivered_retract("b");

  CHECK_FALSE(l.take_change("a", "A1"));    // the application holds it
  CHECK(l.take_change("a", "A2"));          // changed again during the gap
  CHECK_FALSE(l.take_change("a", "A2"));    // never twice
  CHECK_FALSE(l.take_retraction("b", 11));  // known to be gone
  CHECK(l.take_retraction("c", 12));        // unknown: reported
  CHECK_FALSE(l.take_retraction("c", 12));
  CHECK(l.take_change("c", "C"));     // re-published after its retraction
  CHECK(l.take_retraction("c", 13));  // and retracted again
}

TEST_CASE("catch_up_ledger: retractions logged at the anchor's counter before the sync are known",
          "[unit][catch_up]") {
  catch_up_ledger l;
  sync_point sp = sync_at(5);
  sp.retracted_at_seq = {"x"};
  l.anchor_at(sp);
  CHECK_FALSE(l.take_retraction("x", 5));  // before the sync point
  CHECK(l.take_retraction("y", 5));        // after it, not seen live
  CHECK(l.take_retraction("z", 6));
}

TEST_CASE("catch_up_ledger: the score window skips the ids at its starting score",
          "[unit][catch_up]") {
  catch_up_ledger l;
  sync_point sp = sync_at(3);
  sp.window_from = "1000.5";
  sp.window_excluded = {"top"};
  l.anchor_at(sp);
  CHECK_FALSE(l.take_window_item("top", "1000.5", "T"));  // the newest item at the sync
  CHECK(l.take_window_item("top", "1002", "T2"));         // re-published since
  CHECK(l.take_window_item("other", "1000.5", "O"));      // same score, other client
}

TEST_CASE("catch_up_ledger: buffered live events that repeat the replayed item are not new",
          "[unit][catch_up]") {
  catch_up_ledger l;
  l.anchor_at(sync_at(1));
  CHECK(l.take_change("a", "A2"));
  std::string_view same = "A2", newer = "A3";
  CHECK_FALSE(l.take_buffered("a", &same));  // the replay read it after this change
  CHECK(l.take_buffered("a", &same));        // only the first is compared
  CHECK(l.take_change("b", "B"));
  CHECK(l.take_buffered("b", &newer));
  CHECK(l.take_change("c", "C"));
  CHECK(l.take_buffered("c", nullptr));  // a retraction is always delivered
  CHECK(l.take_buffered("d", &same));    // not replayed at all
  CHECK(l.take_change("e", "E"));
  l.end_replay();
  std::string_view e = "E";
  CHECK(l.take_buffered("e", &e));  // the replay is over: a change again
}

TEST_CASE("catch_up_ledger: late messages of changes shown from the score window",
          "[unit][catch_up]") {
  catch_up_ledger l;
  sync_point sp = sync_at(1);
  sp.window_from = "-inf";
  l.anchor_at(sp);
  CHECK(l.take_window_item("k", "5", "K"));
  CHECK(l.take_window_item("m", "6", "M"));
  l.end_replay();
  l.anchor_at(sync_at(9));  // the round's own sync point
  std::string_view k = "K", m2 = "M2";
  CHECK(l.late_duplicate("k", &k));         // the EXEC was read, the PUBLISH came after
  CHECK_FALSE(l.late_duplicate("k", &k));   // once only
  CHECK_FALSE(l.late_duplicate("m", &m2));  // a different item: a real change
  CHECK_FALSE(l.late_duplicate("z", &k));
  // A library change is never held back.
  CHECK(l.take_change("n", "N"));
  std::string_view n = "N";
  CHECK_FALSE(l.late_duplicate("n", &n));
}

TEST_CASE("catch_up_ledger: re-anchoring with the marker before or after the reply, or failing",
          "[unit][catch_up]") {
  SECTION("marker, then reply: what came after the marker is kept") {
    catch_up_ledger l;
    l.anchor_at(sync_at(1));
    l.delivered_publish("before", "B");
    l.split();
    CHECK(l.split_pending());
    l.delivered_publish("after", "A");
    l.commit(sync_at(7));
    CHECK(l.anchor().seq == 7);
    CHECK(l.take_change("before", "B"));       // covered by the new anchor: the
                                               // replay would not list it
    CHECK_FALSE(l.take_change("after", "A"));  // delivered after the marker
  }
  SECTION("the re-anchor fails after its marker: nothing is forgotten") {
    catch_up_ledger l;
    l.anchor_at(sync_at(1));
    l.delivered_publish("x", "X1");
    l.delivered_publish("y", "Y");
    l.split();
    l.delivered_publish("x", "X2");
    l.unsplit();
    CHECK_FALSE(l.split_pending());
    CHECK(l.anchor().seq == 1);
    CHECK_FALSE(l.take_change("x", "X2"));  // the newer delivery wins
    CHECK(l.take_change("x", "X1"));
    CHECK_FALSE(l.take_change("y", "Y"));
  }
  SECTION("a re-anchor is asked for after reanchor_after live events") {
    catch_up_ledger l;
    l.anchor_at(sync_at(0));
    for (std::size_t i = 0; i + 1 < catch_up_ledger::reanchor_after; ++i)
      l.delivered_publish(std::to_string(i), "v");
    CHECK_FALSE(l.wants_reanchor());
    l.delivered_retract("0");
    CHECK(l.wants_reanchor());
    l.split();
    l.commit(sync_at(2000));
    CHECK_FALSE(l.wants_reanchor());
    CHECK(l.size() == 0);
  }
}
