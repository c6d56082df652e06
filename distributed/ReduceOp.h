// ReduceOp: how a collective combines the ranks' values.
#pragma once

#include <string>

namespace loom {
namespace distributed {

enum class ReduceOp { Sum, Avg, Product, Min, Max };

// "sum", "avg", ... for messages.
std::string to_string(ReduceOp op);

}  // namespace distributed
}  // namespace loom
