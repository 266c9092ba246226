// Inter-op parallelism for graph replays. Eager mode runs one operator at a
// time and splits each over the OpenMP threads; at the sizes a training step
// has per rank (a few hundred rows) a GEMM split in two waits at its barrier,
// and the memory-bound operators between GEMMs run on one thread while the
// others spin. A graph knows which operators are independent, so it can
// also run them side by side, one thread each.
//
// PlanInterOp groups the nodes [begin, end) of one phase (the forward or the
// backward part) into steps:
//   - chains: a node joins its producer's chain when it is that producer's
//     only consumer in the phase and the producer is its only producer
//     (Linear -> Reshape -> Transpose -> Contiguous -> Rope is one chain);
//   - steps: chains at the same depth of the chain graph (the longest path
//     from the phase's start) are independent and form one step; a node
//     with effects (an in-place update) or communication (a collective,
//     which every rank must run in the same order) is a step of its own
//     and orders everything around it.
// A step with two or more chains is a candidate: RunInterOp runs it either
// sequentially (each operator with every thread) or with the chains spread
// over the threads (one thread per chain, heaviest first, dynamic), and it
// chooses by measurement: the first replays alternate the two ways for each
// candidate step, timing the step, and after kTrials of each it keeps the
// faster by median (sequential unless parallel wins by 3 %). With one
// OpenMP thread every step runs sequentially.
// Values are dropped after their last reader in execution order: inside a
// chain when no other chain of that step reads them, otherwise after the
// last chain reading them (sequential) or once the step completes
// (parallel); an output nothing reads, right after its node.
// The result does not depend on the choice: a kernel computes the same bits
// on one thread as on several (tested in inter_op_test).
// Thread-safety: one thread calls RunInterOp for a schedule at a time; the
// trial state is mutable in the schedule.
#pragma once

#include <string>
#include <vector>

#include "tessera/graph/ir.h"

namespace tessera::graph {

struct InterOpChain {
  std::vector<int> nodes;                    // in order
  std::vector<std::vector<int>> drop_after;  // per node: values dropped after it
  double cost = 0;                           // estimated single-thread ns (orders chains, heaviest first)
};

struct InterOpStep {
  std::vector<InterOpChain> chains;  // independent of each other
  // Per chain: values several chains read, dropped after that chain when
  // the step runs sequentially, once every chain is done in parallel.
  std::vector<std::vector<int>> drop_after_chain;
  // Measurement (candidate steps only).
  int decision = -1;  // -1: still measuring, 0: sequential, 1: parallel
  std::vector<double> seconds[2];
  bool candidate() const { return chains.size() >= 2; }
};

struct InterOpSchedule {
  std::vector<InterOpStep> steps;
  int threads = 1;  // OpenMP threads when planned
  static constexpr int kTrials = 5;

  int candidates() const;
  int parallel_steps() const;  // decided parallel
  int undecided() const;
  std::string Summary() const;  // "12 steps, 4 with independent chains: 3 parallel, 1 sequential (2 threads)"
  // One line per step with independent chains: "step 3: Linear>Reshape>Rope | Linear>Rope | Linear".
  std::string ToText(const Graph& g) const;
};

// Plans [begin, end) of g. `last_use` is per value the last node (anywhere
// in the graph) reading it or a view of it, `pinned` the values never
// dropped. `threads`: omp_get_max_threads() when 0.
InterOpSchedule PlanInterOp(const Graph& g, int begin, int end, const std::vector<int>& last_use,
                            const std::vector<bool>& pinned, int threads = 0);

// Runs the schedule's nodes over `slot` (indexed by value id). `force`:
// -1 measures as described above, 0 always sequential, 1 always parallel
// (tests). Chains run in parallel only with grad mode off, outside an
// OpenMP team, and with omp_get_max_threads() > 1 (at most the schedule's
// threads). Exceptions from a node propagate after every thread stopped.
void RunInterOp(const Graph& g, InterOpSchedule& schedule, std::vector<Tensor>& slot, int force = -1);

// The estimated single-thread cost of a node in nanoseconds (GEMM and
// attention FLOPs at a nominal rate, other nodes by bytes touched).
double EstimateNodeCost(const Graph& g, const Node& node);

}  // namespace tessera::graph
