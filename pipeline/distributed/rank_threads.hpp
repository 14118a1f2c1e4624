// Running the local ranks of a data-parallel job: one thread per rank, each driving its own backend and
// communicator. A rank that throws aborts its communicator, so the others' collectives throw "rank K failed:
// <why>" instead of waiting forever.
#pragma once
#include <functional>
#include <vector>

#include "pipeline/distributed/communicator.hpp"

namespace lab {

// Calls body(i) on a new thread for each communicators[i] and joins them all. When a body throws, its
// communicator is aborted with the exception's message; after every thread has ended, the exception of the
// rank that failed first (the cause, not the other ranks' "rank K failed") is rethrown with its type.
void run_rank_threads(const std::vector<Communicator*>& communicators, const std::function<void(int)>& body);

}  // namespace lab
