// Precompiled header for the test executables.
#pragma once
#include <catch2/catch.hpp>
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/json.hpp>
#include <thoonk/thoonk.hpp>
