# Managed by sparkops.specdec (specdec_server role). Runs INSIDE the trtllm-multinode
# container on the head node: `server.sh start|stop|status`. Rendered from the launch spec of
# the deployment plan (state file: /var/lib/sparkops/specdec/deployments/spark-1.json); `recycle` is the supervisor's only. No secrets here: HF_TOKEN,
# when set, comes from the `docker exec` environment and reaches the ranks with `mpirun -x HF_TOKEN`.
# start and stop hold a lock shared with the supervisor in the container (trtllm_container's specdec_supervisor.py,
# which restarts the recorded server after a reboot or a crash): it never races them. stop first removes the consent
# record autostart.json, so that a server stopped on purpose (by Ansible or by hand) stays stopped. recycle (the
# supervisor's hang watchdog, under its lock) stops a hung server the same way but keeps the record, so the supervisor
# starts it again. Two nodes: SIGTERM to mpirun's process group; mpirun then stops the ranks on every node.
set -euo pipefail
cd /var/lib/sparkops/specdec
pidfile=server.pid
lock() {  # the supervisor holds the lock itself when it runs `server.sh start`
  [ -n "${SPARKOPS_SERVER_LOCK_HELD:-}" ] && return 0
  mkdir -p /run/sparkops-specdec
  exec 9>>/run/sparkops-specdec/server.lock
  flock 9
}
running() {  # alive and not a zombie
  local pid state
  [ -s "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}
halt() {  # stop the server's process group: SIGCONT (a stopped process must see SIGTERM), SIGTERM, SIGKILL after 60 s
  local pid
  pid=$(cat "$pidfile")
  kill -CONT -- "-$pid" 2>/dev/null || kill -CONT "$pid" 2>/dev/null || true
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
  for _ in $(seq 1 60); do running || break; sleep 1; done
  if running; then kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid"; fi
  for _ in $(seq 1 10); do running || break; sleep 1; done
}
case "${1:-status}" in
  start)
    lock
    if running; then echo "already running (pid $(cat "$pidfile"))"; exit 0; fi
    export b_lower='x y'
    export HF_HUB_OFFLINE=1
    export NCCL_DEBUG=WARN
    forward=(-x b_lower -x HF_HUB_OFFLINE -x NCCL_DEBUG )
    # Container settings that ssh-spawned remote ranks would not inherit otherwise.
    for v in CPATH TRITON_PTXAS_PATH NCCL_SOCKET_IFNAME UCX_NET_DEVICES NCCL_IB_HCA; do
      if [ -n "${!v:-}" ]; then forward+=(-x "$v"); fi
    done
    if [ -n "${HF_TOKEN:-}" ]; then forward+=(-x HF_TOKEN); fi
    nohup setsid mpirun "${forward[@]}" trtllm-llmapi-launch trtllm-serve serve nvidia/Qwen3-235B-A22B-FP4 --host 0.0.0.0 --port 8355 --extra_llm_api_options /var/lib/sparkops/specdec/extra-llm-api-config.yml 'it'"'"'s' \
      </dev/null >server.log 2>&1 9>&- &
    echo $! > "$pidfile"
    echo "started (pid $!)"
    ;;
  stop)
    lock
    rm -f autostart.json
    if running; then
      pid=$(cat "$pidfile")
      halt
      echo "stopped (pid $pid)"
    fi
    rm -f "$pidfile"
    ;;
  recycle)  # the supervisor's hang watchdog only: stop a hung server, keep autostart.json (it starts it again)
    lock
    if running; then
      pid=$(cat "$pidfile")
      halt
      if running; then echo "pid $pid still alive after SIGKILL (uninterruptible?): left to the next look" >&2; exit 1; fi
      echo "recycled (pid $pid)"
    fi
    rm -f "$pidfile"
    ;;
  status)
    if running; then echo "running (pid $(cat "$pidfile"))"; else echo "stopped"; exit 3; fi
    ;;
  *) echo "usage: $0 start|stop|status|recycle" >&2; exit 2 ;;
esac
