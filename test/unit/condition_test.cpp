// thoonk::condition: every error code belongs to exactly one condition,
// transport codes and cancellation are classified, and is_transient agrees
// with condition::transient.
#include <thoonk/condition.hpp>
#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <catch2/catch.hpp>

#include <array>

using thoonk::condition;
using E = thoonk::error;

namespace {

constexpr std::array all_conditions{
    condition::transient, condition::cancelled,   condition::protocol,   condition::invalid_input,
    condition::not_found, condition::wrong_state, condition::permission, condition::server_refused};

// How many conditions `ec` compares equal to.
int matches(const boost::system::error_code& ec) {
  int n = 0;
  for (auto c : all_conditions) n += ec == c ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("condition: every thoonk::error code compares equal to exactly one condition",
          "[unit][condition]") {
  // Codes are numbered from 1 without gaps; the category names the first
  // number past the last as unknown.
  int last = 0;
  for (int v = 1; v < 1000; ++v) {
    auto msg = thoonk::category().message(v);
    if (msg.starts_with("unknown thoonk error")) break;
    last = v;
    boost::system::error_code ec(v, thoonk::category());
    INFO("code " << v << ": " << msg);
    CHECK(matches(ec) == 1);
    CHECK((ec == thoonk::condition_of(ec)));
  }
  CHECK(last >= static_cast<int>(E::cluster_cross_slot));
}

TEST_CASE("condition: the groups an application decides on", "[unit][condition]") {
  CHECK(make_error_code(E::unknown_outcome) == condition::transient);
  CHECK(make_error_code(E::request_timeout) == condition::transient);
  CHECK(make_error_code(E::cluster_topology_unavailable) == condition::transient);
  CHECK(make_error_code(E::client_stopped) == condition::cancelled);
  CHECK(make_error_code(E::invalid_type_byte) == condition::protocol);
  CHECK(make_error_code(E::reply_memory_exceeded) == condition::protocol);
  CHECK(make_error_code(E::invalid_name) == condition::invalid_input);
  CHECK(make_error_code(E::invalid_argument) == condition::invalid_input);
  CHECK(make_error_code(E::feed_not_found) == condition::not_found);
  CHECK(make_error_code(E::queue_empty) == condition::not_found);
  CHECK(make_error_code(E::lost_claim) == condition::wrong_state);
  CHECK(make_error_code(E::job_not_claimed) == condition::wrong_state);
  CHECK(make_error_code(E::no_permission) == condition::permission);
  CHECK(make_error_code(E::auth_failed) == condition::permission);
  CHECK(make_error_code(E::script_error) == condition::server_refused);
  CHECK(make_error_code(E::server_error) != condition::transient);
}

TEST_CASE("condition: transport codes are transient, cancellation is cancelled",
          "[unit][condition]") {
  namespace ae = boost::asio::error;
  CHECK(boost::system::error_code(ae::connection_refused) == condition::transient);
  CHECK(boost::system::error_code(ae::connection_reset) == condition::transient);
  CHECK(boost::system::error_code(ae::eof) == condition::transient);
  CHECK(boost::system::error_code(ae::host_not_found) == condition::transient);
  CHECK(boost::system::error_code(ae::operation_aborted) == condition::cancelled);
  CHECK(!(boost::system::error_code(ae::operation_aborted) == condition::transient));
  // A code of a category the library does not know is the server's refusal,
  // never transient (nothing says retrying helps).
  boost::system::error_code ssl(boost::asio::ssl::error::stream_truncated);
  CHECK(matches(ssl) == 1);
  // A success is no condition at all.
  CHECK(matches(boost::system::error_code{}) == 0);
}

TEST_CASE("condition: is_transient is condition::transient", "[unit][condition]") {
  CHECK(thoonk::is_transient(make_error_code(E::unknown_outcome)));
  CHECK(thoonk::is_transient(boost::asio::error::connection_reset));
  CHECK(!thoonk::is_transient(make_error_code(E::lost_claim)));
  CHECK(!thoonk::is_transient(boost::asio::error::operation_aborted));
  CHECK(!thoonk::is_transient(boost::system::error_code{}));
}

TEST_CASE("condition: the category's name and messages", "[unit][condition]") {
  CHECK(std::string(thoonk::condition_category().name()) == "thoonk.condition");
  for (auto c : all_conditions) CHECK(!make_error_condition(c).message().empty());
  CHECK(make_error_condition(condition::transient).message().find("tried again") !=
        std::string::npos);
}
