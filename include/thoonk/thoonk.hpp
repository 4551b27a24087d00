// Umbrella header: everything a user of thoonk-asio needs.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/cluster.hpp>
#include <thoonk/completion.hpp>
#include <thoonk/condition.hpp>
#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/diagnostics.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/job_queue.hpp>
#include <thoonk/queue.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/parser.hpp>
#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>
#include <thoonk/sorted_feed.hpp>
#include <thoonk/subscriber.hpp>
#include <thoonk/version.hpp>
