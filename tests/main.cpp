// Catch2 entry point of lab_tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
