# Sourced by the bench scripts that need two "hosts" (overlap.sh,
# compressed_allreduce.sh): network namespaces joined by a veth pair, both
# ends shaped with tc — tbf at RATE (BURST, LATENCY), plus netem DELAY each
# way where the kernel has sch_netem (this VM's does not: LINK_SHAPE says
# which). Needs root.
#   . bench/netns_link.sh
#   netns_link_up TAG ADDR_A ADDR_B     # sets NS_A, NS_B, LINK_SHAPE
#   ... ip netns exec "$NS_A" ... ; ip netns exec "$NS_B" ...
#   netns_link_down                      # (from the caller's EXIT trap)
RATE=${RATE:-1gbit}
DELAY=${DELAY:-0.5ms}
BURST=${BURST:-256kb}
LATENCY=${LATENCY:-100ms}

netns_link_up() {  # TAG ADDR_A ADDR_B
  local tag=$1 addr_a=$2 addr_b=$3
  NS_A=$tag-a NS_B=$tag-b
  local va=v$tag-a vb=v$tag-b
  va=${va:0:15} vb=${vb:0:15}  # interface names: 15 characters at most
  ip netns add "$NS_A"
  ip netns add "$NS_B"
  ip link add "$va" netns "$NS_A" type veth peer name "$vb" netns "$NS_B"
  ip -n "$NS_A" addr add "$addr_a/24" dev "$va"
  ip -n "$NS_B" addr add "$addr_b/24" dev "$vb"
  local ns_dev ns dev
  for ns_dev in "$NS_A:$va" "$NS_B:$vb"; do
    ns=${ns_dev%%:*} dev=${ns_dev##*:}
    ip -n "$ns" link set "$dev" up
    ip -n "$ns" link set lo up
    if ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$DELAY" 2>/dev/null; then
      ip netns exec "$ns" tc qdisc add dev "$dev" parent 1: handle 2: tbf rate "$RATE" burst "$BURST" latency "$LATENCY"
      LINK_SHAPE="tbf $RATE (burst $BURST) + netem delay $DELAY each way"
    else
      ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$RATE" burst "$BURST" latency "$LATENCY"
      LINK_SHAPE="tbf $RATE (burst $BURST; no netem in this kernel: no added delay)"
    fi
  done
}

netns_link_down() {
  [ -z "${NS_A:-}" ] || ip netns del "$NS_A" 2>/dev/null || true
  [ -z "${NS_B:-}" ] || ip netns del "$NS_B" 2>/dev/null || true
  return 0
}
