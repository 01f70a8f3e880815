# The netplan_qsfp peer test (sh -c, one run per node): $1 and $2 are this node's interfaces on logical links 1 and 2,
# then three arguments per peer: its name and its addresses on links 1 and 2. Every link is pinged at once (three
# probes 0.2 s apart, 2 s to answer); one line per link: "<link> <interface> <peer> <address> <ping rc> <verdict>",
# the verdict being ping's "packet loss" line, else its last line (its error).
if1=$1 if2=$2
shift 2
while [ "$#" -ge 3 ]; do
  for link in 1 2; do
    if [ "$link" = 1 ]; then dev=$if1 addr=$2; else dev=$if2 addr=$3; fi
    (
      out=$(ping -c 3 -i 0.2 -W 2 -I "$dev" "$addr" 2>&1)
      rc=$?
      verdict=$(printf '%s\n' "$out" | grep -E 'packet loss' | tail -n 1)
      [ -n "$verdict" ] || verdict=$(printf '%s\n' "$out" | tail -n 1)
      printf '%s %s %s %s %s %s\n' "$link" "$dev" "$1" "$addr" "$rc" "$verdict"
    ) &
  done
  shift 3
done
wait
