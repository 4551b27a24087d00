// Precompiled header for the test executables.
#pragma once
#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <thoonk/thoonk.hpp>
