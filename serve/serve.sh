#!/usr/bin/env bash
# A larger class on one machine: N Streamlit processes behind nginx with sticky sessions.
#
#   bash serve/serve.sh [N] [PORT]      # N processes (default: one per core), nginx on PORT (default 8080)
#   bash serve/serve.sh stop            # stop what a previous call started
#
# One Streamlit process runs every session's script in one Python interpreter (one core at a time);
# N processes use N cores. nginx (Debian's nginx-light: `apt-get install nginx-light`) sends each
# browser to one process for its whole visit: the first response sets a cookie with a random id and
# the upstream is chosen by `hash $cookie consistent`, so the websocket, uploads and downloads of a
# session reach the process that holds its state. Everything runs on this machine; logs and pids
# go to $RUN (default /tmp/bridging-dl-serve).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-/tmp/bridging-dl-serve}
mkdir -p "$RUN"

stop() {
  [[ -f $RUN/nginx.pid ]] && nginx -c "$RUN/nginx.conf" -p "$RUN" -s stop 2>/dev/null || true
  for f in "$RUN"/streamlit-*.pid; do [[ -f $f ]] && kill "$(cat "$f")" 2>/dev/null || true; rm -f "$f"; done
  rm -f "$RUN/nginx.pid"
}

if [[ ${1:-} == stop ]]; then stop; exit 0; fi
N=${1:-$(nproc)}
PORT=${2:-8080}
BASE=${BASE:-8601}
for value in "$N" "$PORT" "$BASE"; do
  [[ $value =~ ^[0-9]{1,5}$ ]] || { echo "serve.sh: N, PORT and BASE are numbers, not '$value'" >&2; exit 2; }
done
if ((PORT >= BASE && PORT < BASE + N)); then   # nginx could not listen, and a client would reach one process
  echo "serve.sh: port $PORT is one of the Streamlit processes' ports $BASE-$((BASE + N - 1)) (BASE); choose another" >&2
  exit 2
fi
command -v nginx >/dev/null || { echo "serve.sh needs nginx: apt-get install nginx-light" >&2; exit 2; }
stop

servers=""
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  python serve/warm_start.py --server.port "$port" --server.address 127.0.0.1 --server.headless true \
    >"$RUN/streamlit-$port.log" 2>&1 &
  echo $! >"$RUN/streamlit-$port.pid"
  servers+="    server 127.0.0.1:$port;"$'\n'
done

cat >"$RUN/nginx.conf" <<CONF
worker_processes 1;
pid $RUN/nginx.pid;
error_log $RUN/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $RUN/body; proxy_temp_path $RUN/proxy;
  fastcgi_temp_path $RUN/fastcgi; uwsgi_temp_path $RUN/uwsgi; scgi_temp_path $RUN/scgi;
  client_max_body_size 2m;                     # the app refuses uploads over 1 MB itself
  map \$cookie_explorer_backend \$sticky { "" \$request_id; default \$cookie_explorer_backend; }
  map \$http_upgrade \$connection_upgrade { default upgrade; "" close; }
  upstream explorer {
    hash \$sticky consistent;
$servers  }
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://explorer;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection \$connection_upgrade;
      proxy_set_header Host \$host;
      proxy_read_timeout 1d;
      add_header Set-Cookie "explorer_backend=\$sticky; Path=/; SameSite=Lax" always;
    }
  }
}
CONF

for ((i = 0; i < N; i++)); do          # wait until every process answers its health check
  port=$((BASE + i))
  up=0
  for _ in $(seq 360); do              # up to 3 min: serve/warm_start.py imports the library first
    curl -sf "http://127.0.0.1:$port/_stcore/health" >/dev/null && { up=1; break; }
    kill -0 "$(cat "$RUN/streamlit-$port.pid")" 2>/dev/null || break     # the process died: no use waiting
    sleep 0.5
  done
  if ((!up)); then
    echo "the server on port $port did not start; the end of $RUN/streamlit-$port.log:" >&2
    tail -n 20 "$RUN/streamlit-$port.log" >&2
    stop
    exit 1
  fi
done
if ! nginx -c "$RUN/nginx.conf" -p "$RUN"; then   # e.g. the port is taken: no half-started class server
  echo "serve.sh: nginx did not start (its messages above); the Streamlit processes are stopped" >&2
  stop
  exit 1
fi
echo "serving $N processes at http://127.0.0.1:$PORT (bash serve/serve.sh stop to end)"
