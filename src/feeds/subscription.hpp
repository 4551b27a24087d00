// Feed subscriptions: typed events, shared channels, catch-up state machine.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/feed_events.hpp>

#include <string>

namespace thoonk::detail {

/// Subscribes to a feed (type feed or sorted_feed) of `c`; see
/// feed::subscribe and docs/feeds.md.
void start_feed_subscribe(const std::shared_ptr<detail::client_core>& c, std::string name,
                          feed_type type, feed_callback cb, feed_subscribe_options opts,
                          feed_subscribe_handler h);

}  // namespace thoonk::detail
