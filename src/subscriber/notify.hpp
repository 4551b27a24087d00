// How the library subscribes to its own notification channels.
#pragma once

#include "detail/client_core.hpp"

#include <thoonk/client.hpp>
#include <thoonk/subscriber.hpp>

#include <string>
#include <utility>

namespace thoonk::detail {

/// Subscribes to one of the library's notification channels (a feed's
/// events and catch-up markers, a queue's wake-ups, a job queue's finish,
/// event and abort channels) on the client's subscriber: with SSUBSCRIBE in
/// cluster mode, where the scripts send them with SPUBLISH (and the
/// channels carry the feed's hash tag, detail::feed_names), else with
/// SUBSCRIBE, as the contract does. The management channels (newfeed,
/// delfeed, conffeed) are classic ones everywhere. Same completion as
/// subscriber::subscribe.
template <class CompletionToken>
auto subscribe_notifications(detail::client_core& c, std::string channel, subscriber::callback cb,
                             CompletionToken&& token) {
  if (c.get_config().cluster)
    return c.sub().async_ssubscribe(std::move(channel), std::move(cb),
                                    std::forward<CompletionToken>(token));
  return c.sub().async_subscribe(std::move(channel), std::move(cb),
                                 std::forward<CompletionToken>(token));
}

}  // namespace thoonk::detail
