#include "query_options.h"

namespace tessera::cli {
namespace {

void AddPlanCommon(CLI::App* sub, plan::PlanQueryCommon* a) {
  sub->add_option("--model", a->model, "model spec TOML (configs/models/)")->required();
  sub->add_option("--cluster", a->cluster, "cluster spec TOML (configs/clusters/)")->required();
  sub->add_option("--global-batch", a->global_batch, "sequences per step (default: the model's global_batch)");
  sub->add_option("--seq", a->seq, "sequence length (default: the model's)");
  sub->add_option("--tokens", a->tokens, "token budget: add wall-clock, card-hours and goodput");
  sub->add_option("--restart-s", a->restart_s, "restart after a failure: relaunch + reload (600 s)");
  sub->add_option("--spare-fraction", a->spare_fraction, "spare cards as a fraction of the job's (0.02; 0: repairs)");
  sub->add_option("--checkpoint-s", a->checkpoint_s, "checkpoint write time (default: states over the host link)");
  sub->add_option("--mtbf-hours", a->mtbf_hours, "per-card MTBF (default: the cluster spec's)");
}

}  // namespace

void AddEvaluateOptions(CLI::App* e, plan::EvaluateQuery* q) {
  AddPlanCommon(e, &q->common);
  e->add_option("--dp", q->plan.dp, "data-parallel size")->required();
  e->add_option("--tp", q->plan.tp, "tensor-parallel size")->required();
  e->add_option("--pp", q->plan.pp, "pipeline stages")->required();
  e->add_option("--ep", q->plan.ep, "expert-parallel size (divides dp*tp)");
  e->add_option("--vpp", q->plan.vpp, "virtual stages per device (interleaved schedule)");
  e->add_option("--micro-batch", q->plan.micro_batch, "sequences per micro-batch")->required();
  e->add_option("--zero", q->plan.zero, "ZeRO stage 0..3");
  e->add_option("--recompute", q->recompute, "none|selective|full");
  e->add_option("--precision", q->precision, "bf16|fp8|fp32 (fp32: fp32 kernels and Adam state, as Tessera on CPUs)");
  e->add_option("--schedule", q->schedule, "1f1b|interleaved|zb (default: interleaved when --vpp > 1)");
  e->add_flag("--offload", q->plan.offload_optimizer, "optimizer states on the host tier");
  e->add_flag("--no-sp", q->no_sp, "no sequence parallelism");
  e->add_flag("--no-flash", q->no_flash, "materialize attention scores (no flash attention)");
  e->add_flag("--no-overlap", q->no_overlap, "gradient reduction after the last backward, not overlapped");
  e->add_flag("--no-twin", q->no_twin, "roofline time model even when the cluster has a calibrated .twin.toml");
}

void AddSearchOptions(CLI::App* s, plan::SearchQuery* q) {
  AddPlanCommon(s, &q->common);
  s->add_option("--devices", q->devices, "cards to use")->required();
  s->add_option("--top", q->top, "plans to list (5)");
  s->add_flag("--no-offload", q->no_offload, "do not consider optimizer offload");
  s->add_flag("--no-fp8", q->no_fp8, "do not consider fp8");
}

void AddCollectiveOptions(CLI::App* coll, sim::CollectiveQuery* q) {
  coll->add_option("--cluster", q->cluster, "cluster spec TOML (configs/clusters/)")->required();
  coll->add_option("--op", q->op, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce");
  coll->add_option("--size", q->size, "bytes per rank, nccl-tests convention (suffixes K, M, G)");
  coll->add_option("--algo", q->algo, "auto, ring, tree, hd, hierarchical, pairwise");
  coll->add_option("--routing", q->routing, "ecmp or adaptive");
  coll->add_option("--engine", q->engine,
                   "flow (flow-level), packet (packet-level, small cases) or analytic (closed form)");
  coll->add_option("--cc", q->cc, "packet engine congestion control: dcqcn (ECN + DCQCN) or none");
  coll->add_flag("--pfc", q->pfc, "packet engine: lossless PFC instead of drop-tail");
  coll->add_option("--ranks", q->ranks, "ranks on devices 0..N-1 (default: one super-node)");
  coll->add_option("--fail-uplink", q->fail_uplinks, "fail a super-node fabric uplink SUPERNODE:LEAF:SPINE");
}

void AddStepOptions(CLI::App* step, plan::StepQuery* q) {
  step->add_option("--cluster", q->cluster, "cluster spec TOML")->required();
  step->add_option("--plan", q->plan, "plan TOML ([model] layers hidden seq vocab; [parallel] dp tp pp ...)")
      ->required();
  step->add_option("--trace", q->trace, "write a Chrome trace-event JSON here");
  step->add_flag("--flows", q->flows,
                 "simulate communication as flows, reduced by symmetry (representative dp replicas, merged ring steps)");
  step->add_flag("--full-flows", q->full_flows, "simulate every rank's communication as flows (slower)");
  step->add_option("--replicas", q->replicas, "with --flows: dp replicas whose pipelines are simulated");
  step->add_option("--routing", q->routing, "with --flows: ecmp or adaptive");
}

void AddTrainOptions(CLI::App* cmd, train::TrainQuery* q) {
  cmd->add_option("config", q->config, "training config (TOML)");
  cmd->add_option("--set", q->overrides, "override a config key: --set train.steps=50 (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--resume", q->resume,
                  "resume from a checkpoint: its directory, or 'latest' under checkpoint.dir (= --set "
                  "checkpoint.resume=...)");
  cmd->add_flag("--plain", q->plain, "plain log lines instead of a progress bar");
  cmd->add_flag("--trace", q->trace,
                "write runs/<name>/trace.json: a Chrome trace-event timeline of one step across all ranks");
  cmd->add_option("--trace-step", q->trace_step, "the step --trace records (default 2)");
}

void AddLaunchOptions(CLI::App* cmd, comm::LaunchQuery* q) {
  cmd->add_option("--nproc", q->nproc, "ranks to start on this node")->required()->check(CLI::Range(1, 4096));
  cmd->add_option("--nnodes", q->nnodes,
                  "nodes in the job: N, or MIN:MAX for elastic membership (a lost node is dropped while MIN "
                  "remain, a returning one is added)");
  cmd->add_option("--node-rank", q->node_rank,
                  "this node's index (0 hosts the job store and must stay, also in an elastic job)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--elastic-wait", q->elastic_wait_s,
                  "elastic: seconds node 0 waits at the start for MAX nodes once MIN have joined (default 10)");
  cmd->add_option("--master", q->master,
                  "ADDR:PORT of node 0's job store (required with --nnodes > 1; optional port on one node)");
  cmd->add_option("--token", q->token,
                  "job token shared by all nodes (default: TESSERA_JOB_TOKEN, else node 0 generates one)");
  cmd->add_option("--timeout", q->timeout_s, "stop the job after S seconds (0: no limit)");
  cmd->add_option("--grace", q->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks");
  cmd->add_option("--connect-timeout", q->connect_timeout_s,
                  "seconds to wait for node 0's store (and, on node 0, for the other nodes to finish)");
  cmd->add_flag("--no-prefix", q->no_prefix, "do not prefix output lines with [rank R]");
  cmd->add_option("--max-restarts", q->max_restarts,
                  "restart the whole group after a rank fails, at most N times (default 0: a failure ends the job)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--spares", q->spares,
                  "keep K warm spare processes that take a failed rank's place (needs --max-restarts and a "
                  "Tessera worker)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--heartbeat-timeout", q->heartbeat_timeout_s,
                  "a rank (or, multi-node, another node's agent) silent this many seconds counts as failed; 0: "
                  "not watched (default 30)");
  cmd->add_option("--heartbeat-interval", q->heartbeat_interval_s,
                  "seconds between heartbeats (default: min(1, timeout/4))");
  cmd->add_option("--events", q->events,
                  "append every agent event (failure, restart, spare_assigned, restored, node_lost, node_joined, "
                  "membership, gave_up, done) to this "
                  "JSON-lines file, e.g. runs/NAME/events.jsonl");
  cmd->add_option("command", q->command, "the command to run, after --")->required();
}

}  // namespace tessera::cli
