#include "distributed/ReduceOp.h"

namespace loom {
namespace distributed {

std::string to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Product: return "product";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "unknown";
}

}  // namespace distributed
}  // namespace loom
