#!/usr/bin/env bash
# Acceptance against rate limiters other people wrote: installs them from the package registries
# (nginx's limit_req and HAProxy's stick tables from Debian, express-rate-limit,
# @fastify/rate-limit and rate-limiter-flexible from npm, Flask-Limiter and slowapi with `limits` and `token-bucket` from PyPI), starts each on a free 127.0.0.1 port, runs a long job through
# polite_fetch with three clients (the crate's default, which must learn the quota; stock
# reqwest-retry; the crate's governor set by hand to the exact quota), and prints one markdown
# table on stdout. Progress goes to stderr.
#
# Usage: scripts/acceptance.sh [--quick] [--requests N] [--concurrency C] [--only NAME[,NAME]]
#                              [--panel] [--server SPEC]... [--clients LIST] [--timeout S]
#                              [--processes P] [--keep DIR] [--list]
#   --quick         120 requests a job (a smoke run); the default is 600
#   --requests N    requests a job (for a server that names no count of its own);
#   --concurrency C tasks sending them (default 10)
#   --only NAMES    only these servers (see --list);  --clients  default,reqwest-retry,governor
#   --panel         the servers of PANEL instead of SERVERS: other parameters and strategies, each
#                   with its own request count (about 50 s at the quota, tens of windows)
#   --server SPEC   an ad-hoc server, a line in the format of SERVERS (below), e.g.
#                   'ex-7|express|fixed window|7 per 2 s|1|window 7 2|7 2000 draft-7|210';
#                   repeatable. Ad-hoc servers run alone: without --only, no server of the list
#                   runs; with it, the ones it names run too. --list shows them with the list.
#   --timeout S     the most one job may take (default 300 s)
#   --processes P   each job as P polite_fetch processes started together, each sending its
#                   share of the requests from C tasks; the default and governor clients share
#                   what they learn (or the bucket) through a private redis-server on loopback
#                   (--redis, one key per job). The elapsed time is the slowest process's.
#   --keep DIR      keep each job's raw output (client JSON, server log) in DIR
#   --list          the servers (of PANEL with --panel) and exit
# Exit: 0 when the default client meets every bar, 3 when it misses one, 1 when something could
# not be installed, built or started.
#
# Installs what is missing: Debian packages with apt-get (as root), the npm and PyPI packages at
# the versions pinned in scripts/acceptance/ into ${XDG_CACHE_HOME:-$HOME/.cache}/
# reqwest-polite-acceptance (nothing lands in the repository).
set -euo pipefail

# The command as typed, an argument with spaces or quotes (a --server spec) in single quotes.
command_line="scripts/acceptance.sh"
for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./,=:+-]+$ ]]; then
        command_line+=" $arg"
    else
        command_line+=" '${arg//\'/\'\\\'\'}'"
    fi
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/acceptance
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/reqwest-polite-acceptance

# name|runner|shape|quota shown|states its quota (1/0)|model and parameters|runner's arguments
#   [|requests]
# model: "window Q W" (Q per W seconds), "rate R B" (R per second, B more at once), or
#   "counter Q W first|clock" (a sliding window counter of Q per W seconds, its windows begun at
#   the key's first request or on the clock's multiples of W; see report.py's minimum_s).
# runner's arguments, by runner (checked against the model, see spec_problem):
#   express      LIMIT WINDOW_MS draft-6|draft-7|draft-8|legacy|none
#   fastify      LIMIT WINDOW_MS x|draft|none plain|continue: @fastify/rate-limit's LocalStore
#                (a fixed window from the client's first request); x: X-RateLimit-* with the
#                reset in seconds from now; draft: RateLimit-Limit/-Remaining/-Reset; none: a
#                bare 429; continue: each refused request begins the window again
#   flask        LIMIT WINDOW_S moving-window|sliding-window-counter|fixed-window headers|none
#   slowapi      LIMIT WINDOW_S moving-window|sliding-window-counter|fixed-window headers|none:
#                slowapi behind Starlette and uvicorn, on the same `limits` strategies as flask;
#                headers: its own (X-RateLimit-Reset the reset in epoch seconds plus one, with a
#                fraction; Retry-After in whole seconds, truncated; on every answer)
#   flexible     POINTS DURATION_S BLOCK_S none|readme: rate-limiter-flexible's RateLimiterMemory
#                (a fixed window from the client's first request, refused requests counted); a
#                BLOCK_S above 0 blocks the key that long from its first refusal; readme: the
#                headers its README sets (Retry-After with a fraction of a second,
#                X-RateLimit-Limit/-Remaining, -Reset in epoch seconds), none: a bare 429
#   nginx        RATE (Nr/s or Nr/m) BURST (0: none) RETRY_AFTER (seconds, or none)
#   tokenbucket  RATE CAPACITY (the model's B is CAPACITY - 1)
#   haproxy      LIMIT PERIOD_S (whole seconds) RETRY_AFTER (seconds, or none): a stick table's
#                http_req_rate(PERIOD_S), which counts every request, refused ones too, and a 429
#                above LIMIT. For a client that does not press on it admits LIMIT per period
#                (model "counter LIMIT PERIOD_S first"); one that does keeps itself refused.
# requests: the job's request count; empty or left out, the --requests value.
SERVERS=(
    "express-draft8|express|fixed window from the client's first request|20 per 2 s|1|window 20 2|20 2000 draft-8"
    "express-bare|express|fixed window from the client's first request, bare 429|20 per 2 s|0|window 20 2|20 2000 none"
    "flask-moving|flask|moving window (sliding log)|20 per 2 s|1|window 20 2|20 2 moving-window headers"
    "flask-moving-bare|flask|moving window (sliding log), bare 429|9 per 1 s|0|window 9 1|9 1 moving-window none"
    "flask-counter|flask|sliding window counter (clock-aligned windows)|17 per 2 s|1|counter 17 2 clock|17 2 sliding-window-counter headers"
    "nginx-bare|nginx|GCRA, no burst, bare 429|10 r/s|0|rate 10 0|10r/s 0 none"
    "nginx-burst|nginx|GCRA, burst=20 nodelay, bare 429|10 r/s + 20|0|rate 10 20|10r/s 20 none"
    "nginx-burst-ra|nginx|GCRA, burst=20 nodelay, Retry-After: 1|10 r/s + 20|0|rate 10 20|10r/s 20 1"
    "token-bucket|tokenbucket|token bucket, bare 429|13 r/s, 6 at once|0|rate 13 5|13 6"
)
# Parameters and strategies that none of SERVERS uses, so that no parameter is tuned to; each
# job about 50 s at the quota's minimum (the report's "minimum") and tens of windows long.
PANEL=(
    "flask-fixed-25per3s|flask|fixed window from the key's first hit|25 per 3 s|1|window 25 3|25 3 fixed-window headers|450"
    "flask-fixed-bare-11per2s|flask|fixed window from the key's first hit, bare 429|11 per 2 s|0|window 11 2|11 2 fixed-window none|300"
    "express-draft8-5per1s|express|fixed window from the client's first request|5 per 1 s|1|window 5 1|5 1000 draft-8|250"
    "express-bare-12per3s|express|fixed window from the client's first request, bare 429|12 per 3 s|0|window 12 3|12 3000 none|200"
    "express-draft7-8per2s|express|fixed window from the client's first request, draft-7 RateLimit|8 per 2 s|1|window 8 2|8 2000 draft-7|240"
    "express-legacy-15per2s|express|fixed window from the client's first request, X-RateLimit-*|15 per 2 s|1|window 15 2|15 2000 legacy|375"
    "flask-moving-10per1s|flask|moving window (sliding log)|10 per 1 s|1|window 10 1|10 1 moving-window headers|500"
    "flask-counter-10per1s|flask|sliding window counter (clock-aligned windows)|10 per 1 s|1|counter 10 1 clock|10 1 sliding-window-counter headers|500"
    "flask-counter-30per3s|flask|sliding window counter (clock-aligned windows)|30 per 3 s|1|counter 30 3 clock|30 3 sliding-window-counter headers|600"
    "nginx-5rs|nginx|GCRA, no burst, bare 429|5 r/s|0|rate 5 0|5r/s 0 none|250"
    "nginx-25rs-burst50|nginx|GCRA, burst=50 nodelay, bare 429|25 r/s + 50|0|rate 25 50|25r/s 50 none|1300"
    "nginx-3rs-burst10-ra2|nginx|GCRA, burst=10 nodelay, Retry-After: 2|3 r/s + 10|0|rate 3 10|3r/s 10 2|160"
    "token-bucket-7rs-cap3|tokenbucket|token bucket, bare 429|7 r/s, 3 at once|0|rate 7 2|7 3|350"
    "haproxy-20per2s|haproxy|stick table http_req_rate, refused requests counted too, bare 429|20 per 2 s|0|counter 20 2 first|20 2 none|520"
    "haproxy-10per1s-ra1|haproxy|stick table http_req_rate, refused requests counted too, Retry-After: 1|10 per 1 s|0|counter 10 1 first|10 1 1|500"
    "fastify-x-12per2s|fastify|fixed window from the client's first request, X-RateLimit-* (reset in seconds from now)|12 per 2 s|1|window 12 2|12 2000 x plain|360"
    "fastify-draft-40per4s|fastify|fixed window from the client's first request, RateLimit-Limit/-Remaining/-Reset|40 per 4 s|1|window 40 4|40 4000 draft plain|520"
    "fastify-bare-continue-6per1s|fastify|fixed window from the client's first request, bare 429, each refused request begins it again|6 per 1 s|0|window 6 1|6 1000 none continue|300"
    "flexible-readme-12per2s|flexible|fixed window from the client's first request, README headers (Retry-After with a fraction, X-RateLimit-Reset a Unix time)|12 per 2 s|1|window 12 2|12 2 0 readme|360"
    "flexible-readme-15per3s-block5|flexible|fixed window from the client's first request, README headers, the key blocked 5 s from its first refusal|15 per 3 s|1|window 15 3|15 3 5 readme|300"
    "flexible-bare-7per1s|flexible|fixed window from the client's first request, bare 429|7 per 1 s|0|window 7 1|7 1 0 none|350"
    "slowapi-fixed-12per2s|slowapi|fixed window from the key's first hit, slowapi's headers (X-RateLimit-Reset a second late, with a fraction)|12 per 2 s|1|window 12 2|12 2 fixed-window headers|360"
    "slowapi-moving-15per3s|slowapi|moving window (sliding log), slowapi's headers (X-RateLimit-Reset a second late, with a fraction)|15 per 3 s|1|window 15 3|15 3 moving-window headers|300"
    "flexible-bare-10per1s-block2|flexible|fixed window from the client's first request, bare 429, the key blocked 2 s from its first refusal|10 per 1 s|0|window 10 1|10 1 2 none|300"
)

requests=600
concurrency=10
only=""
clients="default,reqwest-retry,governor"
job_timeout=300
processes=1
keep=""
panel=""
list=""
adhoc=()
while [ $# -gt 0 ]; do
    case $1 in
        --quick) requests=120 ;;
        --requests) requests=${2:?--requests needs a number}; shift ;;
        --concurrency) concurrency=${2:?--concurrency needs a number}; shift ;;
        --only) only=${2:?--only needs server names}; shift ;;
        --clients) clients=${2:?--clients needs client names}; shift ;;
        --timeout) job_timeout=${2:?--timeout needs seconds}; shift ;;
        --processes) processes=${2:?--processes needs a count}; shift ;;
        --keep) keep=${2:?--keep needs a folder}; shift ;;
        --panel) panel=1 ;;
        --server) adhoc+=("${2:?--server needs a spec (see --help)}"); shift ;;
        --list) list=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "acceptance.sh: unknown argument $1 (see --help)" >&2; exit 1 ;;
    esac
    shift
done
for number in "$requests" "$concurrency" "$job_timeout" "$processes"; do
    [[ $number =~ ^[1-9][0-9]*$ ]] || { echo "acceptance.sh: $number is not a count" >&2; exit 1; }
done
for client in ${clients//,/ }; do
    case $client in default|reqwest-retry|governor) ;; *)
        echo "acceptance.sh: unknown client $client (default, reqwest-retry, governor)" >&2; exit 1 ;;
    esac
done

# numbers_equal X Y [K]: X × K is Y (K 1 when left out), as numbers.
numbers_equal() {
    awk -v x="$1" -v y="$2" -v k="${3:-1}" 'BEGIN { d = x * k - y; exit !(d < 1e-6 && d > -1e-6) }'
}
is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
is_count_or_zero() { [[ $1 =~ ^(0|[1-9][0-9]*)$ ]]; }
is_positive() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ && $1 =~ [1-9] ]]; }

# spec_problem LINE: prints what is wrong with a server line (SERVERS, PANEL or --server), or
# nothing when it is sound: its fields, the runner's arguments, and the model (which the report's
# minimum and the governor's flags come from) and the states field (which picks the 429 bar)
# agreeing with what the runner is asked to do.
spec_problem() {
    local line=$1 bars name runner shape quota states model_args runner_args job_requests
    local model a b x y z rest
    bars=${line//[^|]/}
    if [[ $line == *$'\n'* ]] || { [ "${#bars}" -ne 6 ] && [ "${#bars}" -ne 7 ]; }; then
        echo "needs 7 or 8 fields on one line, name|runner|shape|quota shown|states (1/0)|model and parameters|runner's arguments[|requests]; it has $((${#bars} + 1))"
        return
    fi
    IFS='|' read -r name runner shape quota states model_args runner_args job_requests <<<"$line"
    [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] \
        || { echo "name '$name': letters, digits, '.', '_' and '-' only"; return; }
    [ -n "${shape// /}" ] || { echo "the shape (field 3) is empty"; return; }
    [ -n "${quota// /}" ] || { echo "the quota shown (field 4) is empty"; return; }
    [[ $states == [01] ]] || { echo "states its quota (field 5) is '$states', not 1 or 0"; return; }
    if [ -n "$job_requests" ] && ! is_count "$job_requests"; then
        echo "requests (field 8) is '$job_requests', not a count (or empty for --requests)"; return
    fi
    read -r model a b c rest <<<"$model_args"
    case $model in
        window)
            { is_count "$a" && is_positive "$b" && [ -z "$c" ]; } \
                || { echo "model '$model_args': a window is 'window Q W', Q a count, W seconds > 0"; return; } ;;
        counter)
            { is_count "$a" && is_positive "$b" && [[ $c =~ ^(first|clock)$ ]] && [ -z "$rest" ]; } \
                || { echo "model '$model_args': a counter is 'counter Q W first|clock', Q a count, W seconds > 0"; return; } ;;
        rate)
            { is_positive "$a" && is_count_or_zero "$b" && [ -z "$c" ]; } \
                || { echo "model '$model_args': a rate is 'rate R B', R per second > 0, B a count or 0"; return; } ;;
        *) echo "model '$model_args': 'window Q W', 'rate R B' or 'counter Q W first|clock'"; return ;;
    esac
    read -r x y z rest <<<"$runner_args"
    case $runner in
        express)
            { is_count "$x" && is_count "$y" && [[ $z =~ ^(draft-6|draft-7|draft-8|legacy|none)$ ]] \
                && [ -z "$rest" ]; } \
                || { echo "express's arguments '$runner_args': LIMIT WINDOW_MS draft-6|draft-7|draft-8|legacy|none"; return; }
            { [ "$model" = window ] && [ "$a" = "$x" ] && numbers_equal "$b" "$y" 1000; } \
                || { echo "model '$model_args' is not express's $x per $y ms (window $x $(awk -v y="$y" 'BEGIN { print y / 1000 }'))"; return; }
            ;;
        flask | slowapi)
            { is_count "$x" && is_count "$y" \
                && [[ $z =~ ^(moving-window|sliding-window-counter|fixed-window)$ ]] \
                && [[ $rest =~ ^(headers|none)$ ]]; } \
                || { echo "$runner's arguments '$runner_args': LIMIT WINDOW_S (whole seconds) moving-window|sliding-window-counter|fixed-window headers|none"; return; }
            # limits' sliding window counter keys its windows by the epoch divided by W.
            local expected="window $x $y"
            [ "$z" = sliding-window-counter ] && expected="counter $x $y clock"
            { [ "$model" = "${expected%% *}" ] && [ "$a" = "$x" ] && numbers_equal "$b" "$y" \
                && { [ "$model" = window ] || [ "$c" = clock ]; }; } \
                || { echo "model '$model_args' is not $runner's $x per $y s $z ($expected)"; return; }
            ;;
        nginx)
            { [[ $x =~ ^[1-9][0-9]*r/[sm]$ ]] && is_count_or_zero "$y" \
                && [[ $z =~ ^(none|[1-9][0-9]*)$ ]] && [ -z "$rest" ]; } \
                || { echo "nginx's arguments '$runner_args': RATE (Nr/s or Nr/m) BURST (0 for none) RETRY_AFTER (seconds or none)"; return; }
            local per=1
            [[ $x == */m ]] && per=60
            { [ "$model" = rate ] && numbers_equal "$a" "${x%r/*}" "$per" && [ "$b" = "$y" ]; } \
                || { echo "model '$model_args' is not nginx's $x with burst $y (rate $(awk -v n="${x%r/*}" -v p="$per" 'BEGIN { print n / p }') $y)"; return; }
            ;;
        tokenbucket)
            { is_positive "$x" && is_count "$y" && [ -z "$z" ]; } \
                || { echo "tokenbucket's arguments '$runner_args': RATE (per second) CAPACITY"; return; }
            { [ "$model" = rate ] && numbers_equal "$a" "$x" && [ "$b" = $((y - 1)) ]; } \
                || { echo "model '$model_args' is not a bucket of $y filling at $x/s (rate $x $((y - 1)))"; return; }
            ;;
        haproxy)
            { is_count "$x" && is_count "$y" && [[ $z =~ ^(none|[1-9][0-9]*)$ ]] && [ -z "$rest" ]; } \
                || { echo "haproxy's arguments '$runner_args': LIMIT PERIOD_S (whole seconds) RETRY_AFTER (seconds or none)"; return; }
            # A stick table's rate begins its first period at the entry's first request.
            { [ "$model" = counter ] && [ "$a" = "$x" ] && numbers_equal "$b" "$y" && [ "$c" = first ]; } \
                || { echo "model '$model_args' is not HAProxy's $x per $y s (counter $x $y first)"; return; }
            ;;
        fastify)
            { is_count "$x" && is_count "$y" && [[ $z =~ ^(x|draft|none)$ ]] \
                && [[ $rest =~ ^(plain|continue)$ ]]; } \
                || { echo "fastify's arguments '$runner_args': LIMIT WINDOW_MS x|draft|none plain|continue"; return; }
            # For a client that never presses on, continueExceeding changes nothing.
            { [ "$model" = window ] && [ "$a" = "$x" ] && numbers_equal "$b" "$y" 1000; } \
                || { echo "model '$model_args' is not @fastify/rate-limit's $x per $y ms (window $x $(awk -v y="$y" 'BEGIN { print y / 1000 }'))"; return; }
            ;;
        flexible)
            { is_count "$x" && is_positive "$y" && is_count_or_zero "$z" \
                && [[ $rest =~ ^(none|readme)$ ]]; } \
                || { echo "flexible's arguments '$runner_args': POINTS DURATION_S BLOCK_S (whole seconds, 0 for none) none|readme"; return; }
            # A client that never presses on is never blocked: the window is the quota.
            { [ "$model" = window ] && [ "$a" = "$x" ] && numbers_equal "$b" "$y"; } \
                || { echo "model '$model_args' is not rate-limiter-flexible's $x per $y s (window $x $y)"; return; }
            ;;
        *) echo "runner '$runner': express, fastify, flask, slowapi, flexible, nginx, tokenbucket or haproxy"; return ;;
    esac
    local headers=none
    case $runner in express | fastify) headers=$z ;; flask | slowapi | flexible) headers=$rest ;; esac
    if [ "$headers" = none ] && [ "$states" = 1 ]; then
        echo "states its quota is 1, but $runner with these arguments sends no quota (a bare 429, or a static Retry-After)"
    elif [ "$headers" != none ] && [ "$states" = 0 ]; then
        echo "states its quota is 0, but $runner with '$headers' sends its quota in headers"
    fi
}

if [ -n "$panel" ]; then
    list_name=PANEL
    servers=("${PANEL[@]}")
else
    list_name=SERVERS
    servers=("${SERVERS[@]}")
fi
for line in "${servers[@]}"; do
    problem=$(spec_problem "$line")
    [ -z "$problem" ] || { echo "acceptance.sh: a $list_name line ${line%%|*}: $problem" >&2; exit 1; }
done
names=" $(printf '%s\n' "${servers[@]}" | cut -d'|' -f1 | tr '\n' ' ')"
for line in "${adhoc[@]}"; do
    problem=$(spec_problem "$line")
    [ -z "$problem" ] || { echo "acceptance.sh: --server '$line': $problem" >&2; exit 1; }
    name=${line%%|*}
    [[ $names != *" $name "* ]] \
        || { echo "acceptance.sh: --server '$line': the name $name is taken (see --list)" >&2; exit 1; }
    names+="$name "
done
if [ -n "$only" ]; then
    for name in ${only//,/ }; do
        [[ $names == *" $name "* ]] \
            || { echo "acceptance.sh: no server $name in $list_name or --server (see --list)" >&2; exit 1; }
    done
fi

if [ -n "$list" ]; then
    for line in "${servers[@]}" "${adhoc[@]}"; do
        IFS='|' read -r name _ shape quota _ _ _ job_requests <<<"$line"
        printf '%-26s %-18s %5s  %s\n' "$name" "$quota" "${job_requests:-$requests}" "$shape"
    done
    exit 0
fi

# The ad-hoc servers run alone, with the list's servers that --only names.
selected=()
for line in "${servers[@]}"; do
    name=${line%%|*}
    if { [ -z "$only" ] && [ "${#adhoc[@]}" = 0 ]; } || [[ ",$only," == *",$name,"* ]]; then
        selected+=("$line")
    fi
done
selected+=("${adhoc[@]}")

say() { echo "acceptance: $*" >&2; }
die() { echo "acceptance: $*" >&2; exit 1; }

work=$(mktemp -d /tmp/reqwest-polite-acceptance.XXXXXX)
chmod 755 "$work" # nginx's worker (www-data) reads its file from here
server_pid=""
client_pids=()
redis_pid=""
stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    for pid in "${client_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    stop_server
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    if [ -n "$keep" ] && [ -d "$work/jobs" ]; then
        mkdir -p "$keep" && cp -a "$work/jobs/." "$keep/"
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- What the selected servers need -----------------------------------------------------------
runners=" $(printf '%s\n' "${selected[@]}" | cut -d'|' -f2 | sort -u | tr '\n' ' ')"
apt_missing=()
command -v curl >/dev/null 2>&1 || apt_missing+=(curl)
command -v python3 >/dev/null 2>&1 || apt_missing+=(python3)
python_apps=""
[[ $runners == *" flask "* || $runners == *" slowapi "* || $runners == *" tokenbucket "* ]] && python_apps=1
if [ -n "$python_apps" ] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    apt_missing+=(python3-venv)
fi
node_runners=""
[[ $runners == *" express "* || $runners == *" fastify "* || $runners == *" flexible "* ]] && node_runners=1
if [ -n "$node_runners" ]; then
    command -v node >/dev/null 2>&1 || apt_missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || apt_missing+=(npm)
fi
if [[ $runners == *" nginx "* ]]; then
    PATH=$PATH:/usr/sbin
    command -v nginx >/dev/null 2>&1 || apt_missing+=(nginx-light)
fi
if [[ $runners == *" haproxy "* ]]; then
    PATH=$PATH:/usr/sbin
    command -v haproxy >/dev/null 2>&1 || apt_missing+=(haproxy)
fi
if [ "$processes" -gt 1 ]; then
    command -v redis-server >/dev/null 2>&1 || apt_missing+=(redis-server)
    command -v redis-cli >/dev/null 2>&1 || apt_missing+=(redis-tools)
fi
if [ "${#apt_missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${apt_missing[*]} (apt-get)"
        # policy-rc.d on such machines keeps the packaged nginx and haproxy from starting.
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq "${apt_missing[@]}"; } >"$work/apt.log" 2>&1; then
            tail -20 "$work/apt.log" >&2
            die "apt-get could not install ${apt_missing[*]}"
        fi
    else
        die "missing ${apt_missing[*]}; install them (e.g. sudo apt-get install -y ${apt_missing[*]})"
    fi
fi

fingerprint() { cat "$@" | sha256sum | cut -c1-16; }
node_dir=""
if [ -n "$node_runners" ]; then
    node_dir=$CACHE/node-$(fingerprint "$HERE/package-lock.json")
    if [ ! -f "$node_dir/.installed" ]; then
        say "installing express, express-rate-limit, fastify, @fastify/rate-limit and rate-limiter-flexible (npm ci) into $node_dir"
        mkdir -p "$node_dir"
        cp "$HERE/package.json" "$HERE/package-lock.json" "$node_dir/"
        (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) >"$work/npm.log" 2>&1 \
            || { tail -20 "$work/npm.log" >&2; die "npm ci failed in $node_dir"; }
        touch "$node_dir/.installed"
    fi
fi
venv=""
if [ -n "$python_apps" ]; then
    venv=$CACHE/venv-$(python3 -c 'import sys; print(sys.version.split()[0])')-$(fingerprint "$HERE/requirements.txt")
    if [ ! -f "$venv/.installed" ]; then
        say "installing Flask-Limiter, limits, slowapi, token-bucket, Flask, Starlette, waitress and uvicorn (pip) into $venv"
        rm -rf "$venv"
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q -r "$HERE/requirements.txt"; } \
            >"$work/pip.log" 2>&1 || { tail -20 "$work/pip.log" >&2; die "pip install failed into $venv"; }
        touch "$venv/.installed"
    fi
fi

say "building polite_fetch (release)"
(cd "$ROOT" && cargo build --release --quiet --features mock,redis --example polite_fetch) \
    >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; die "cargo build failed"; }
fetch=$ROOT/target/release/examples/polite_fetch
[ -x "$fetch" ] || die "no $fetch after the build"

# --- Servers ----------------------------------------------------------------------------------
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server RUNNER "ARGS" DIR: starts a fresh limiter (nothing counted yet) on $port.
start_server() {
    local runner=$1 args=$2 dir=$3
    port=$(free_port)
    case $runner in
        express)
            read -r limit window_ms headers <<<"$args"
            NODE_PATH=$node_dir/node_modules node "$HERE/express_limiter.js" \
                "$port" "$limit" "$window_ms" "$headers" >"$dir/server.err" 2>&1 &
            ;;
        fastify)
            read -r limit window_ms headers exceeding <<<"$args"
            NODE_PATH=$node_dir/node_modules node "$HERE/fastify_limiter.js" \
                "$port" "$limit" "$window_ms" "$headers" "$exceeding" >"$dir/server.err" 2>&1 &
            ;;
        flexible)
            read -r points duration block headers <<<"$args"
            NODE_PATH=$node_dir/node_modules node "$HERE/flexible_limiter.js" \
                "$port" "$points" "$duration" "$block" "$headers" >"$dir/server.err" 2>&1 &
            ;;
        flask)
            read -r limit window strategy headers <<<"$args"
            "$venv/bin/python" "$HERE/flask_limiter_app.py" \
                "$port" "$limit per $window seconds" "$strategy" "$headers" >"$dir/server.err" 2>&1 &
            ;;
        slowapi)
            read -r limit window strategy headers <<<"$args"
            "$venv/bin/python" "$HERE/slowapi_app.py" \
                "$port" "$limit per $window seconds" "$strategy" "$headers" >"$dir/server.err" 2>&1 &
            ;;
        tokenbucket)
            read -r rate capacity <<<"$args"
            "$venv/bin/python" "$HERE/token_bucket_app.py" "$port" "$rate" "$capacity" \
                >"$dir/server.err" 2>&1 &
            ;;
        nginx)
            read -r rate burst retry_after <<<"$args"
            local run=$dir/nginx burst_arg=""
            [ "$burst" = 0 ] || burst_arg="burst=$burst nodelay"
            [ "$retry_after" = none ] && retry_after=""
            mkdir -p "$run/www" && chmod -R 755 "$dir" && echo ok >"$run/www/ok.txt"
            sed -e "s|@RUN@|$run|g" -e "s|@PORT@|$port|g" -e "s|@RATE@|$rate|g" \
                -e "s|@BURST_ARG@|$burst_arg|g" -e "s|@RETRY_AFTER@|$retry_after|g" \
                "$HERE/nginx.conf.in" >"$run/nginx.conf"
            nginx -p "$run" -c "$run/nginx.conf" >"$dir/server.err" 2>&1 &
            ;;
        haproxy)
            read -r limit period retry_after <<<"$args"
            local run=$dir/haproxy deny_hdr=""
            [ "$retry_after" = none ] || deny_hdr="hdr Retry-After $retry_after"
            mkdir -p "$run"
            # The entry outlives any pause of the job's (counts over two periods old are 0 anyway).
            sed -e "s|@PORT@|$port|g" -e "s|@LIMIT@|$limit|g" -e "s|@PERIOD@|$period|g" \
                -e "s|@EXPIRE@|$((3 * period + 30))|g" -e "s|@DENY_HDR@|$deny_hdr|g" \
                "$HERE/haproxy.cfg.in" >"$run/haproxy.cfg"
            # In the foreground (-db); its log lines (one per answer) on stdout, into a file.
            haproxy -db -f "$run/haproxy.cfg" >"$run/answers.log" 2>"$dir/server.err" &
            ;;
    esac
    server_pid=$!
    for _ in $(seq 1 100); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/__ready" 2>/dev/null; then
            return 0
        fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    cat "$dir/server.err" >&2
    stop_server
    die "$runner ($args) did not come up on 127.0.0.1:$port"
}

# Copies what the server answered to DIR/server.log, then stops it.
collect_and_stop() {
    local runner=$1 dir=$2
    case $runner in
        nginx) cp "$dir/nginx/access.log" "$dir/server.log" 2>/dev/null || : >"$dir/server.log" ;;
        # "epoch-milliseconds status" (HAProxy logs each answer as it sends it) to seconds.
        haproxy) awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9][0-9][0-9]$/ && NF == 2 {
                     n = length($1); print substr($1, 1, n - 3) "." substr($1, n - 2), $2 }' \
                     "$dir/haproxy/answers.log" >"$dir/server.log" 2>/dev/null || : >"$dir/server.log" ;;
        *) curl -fsS --max-time 10 "http://127.0.0.1:$port/__log" >"$dir/server.log" \
               || die "could not read the server's log from 127.0.0.1:$port/__log" ;;
    esac
    stop_server
}

# The crate's governor set by hand to the quota, and nothing else holding requests back
# (--no-learn: the server's headers are not read; a 429 is still retried after what it says).
# A window (or a counter) of Q per W becomes Q per W spaced evenly (burst 1: a burst of Q would spend a second
# window's quota within the first); a rate R with B more at once becomes R per second with a
# burst of B + 1, the same GCRA.
governor_flags() {
    local model=$1 a=$2 b=$3
    case $model in
        window | counter) echo "--rate $a --per $b --burst 1 --no-learn" ;;
        rate) echo "--rate $a --burst $((b + 1)) --no-learn" ;;
    esac
}

# --- Jobs -------------------------------------------------------------------------------------
# A private Redis for the processes of a job to share through (no disk, loopback only).
if [ "$processes" -gt 1 ]; then
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
        >"$work/redis.log" 2>&1 &
    redis_pid=$!
    for _ in $(seq 50); do
        redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 || die "redis-server did not start (see $work/redis.log)"
fi
mkdir -p "$work/jobs"
started=$SECONDS
started_at=$(date -u '+%Y-%m-%d %H:%M UTC')
job_number=0
for line in "${selected[@]}"; do
    IFS='|' read -r name runner shape quota states model_args runner_args job_requests <<<"$line"
    job_requests=${job_requests:-$requests}
    read -r model a b anchor <<<"$model_args"
    for client in ${clients//,/ }; do
        job_number=$((job_number + 1))
        dir=$work/jobs/$(printf '%02d' "$job_number")-$name-$client
        mkdir -p "$dir"
        case $client in
            default) flags="" ;;
            reqwest-retry) flags="--client reqwest-retry" ;;
            governor) flags=$(governor_flags "$model" "$a" "$b") ;;
        esac
        # Several processes: the learning and governor clients share through Redis, a key
        # of their own for each job (a fresh limiter has nothing learned).
        [ "$job_requests" -ge "$processes" ] \
            || die "$name: $job_requests requests cannot be shared by $processes processes"
        shared=""
        if [ "$processes" -gt 1 ] && [ "$client" != reqwest-retry ]; then
            shared="--redis redis://127.0.0.1:$redis_port --key job-$job_number"
        fi
        start_server "$runner" "$runner_args" "$dir"
        say "$name ($quota) × $client: $job_requests requests, $concurrency tasks${flags:+ ($flags)}$([ "$processes" -gt 1 ] && echo " in each of $processes processes")"
        job_started=$SECONDS
        # In the background and waited for, so a signal to the script ends the job at once.
        # Process p sends its share of the requests (the first ones one more when they do not
        # divide evenly); each writes its own output, merged below.
        for ((p = 0; p < processes; p++)); do
            share=$((job_requests / processes + (p < job_requests % processes ? 1 : 0)))
            out=client.out err=client.err
            [ "$processes" -gt 1 ] && out=client.out.$p err=client.err.$p
            # shellcheck disable=SC2086 # flags are words
            timeout "$job_timeout" "$fetch" "http://127.0.0.1:$port/items/{i}" \
                --requests "$share" --concurrency "$concurrency" --json $flags $shared \
                >"$dir/$out" 2>"$dir/$err" </dev/null &
            client_pids+=($!)
        done
        exit_code=0
        for pid in "${client_pids[@]}"; do
            code=0
            wait "$pid" || code=$?
            # The worst exit of the processes: a timeout, then a loss, then any other.
            if [ "$code" = 124 ] || { [ "$code" != 0 ] && [ "$exit_code" != 124 ]; }; then
                exit_code=$code
            fi
        done
        client_pids=()
        [ "$processes" -gt 1 ] && python3 "$HERE/merge_processes.py" "$dir" "$processes"
        collect_and_stop "$runner" "$dir"
        [ "$exit_code" = 124 ] && say "  timed out after $job_timeout s"
        # polite_fetch exits 1 when a request was lost: a result, not a failure of the harness.
        if [ "$exit_code" != 0 ] && [ "$exit_code" != 1 ] && [ "$exit_code" != 124 ]; then
            tail -5 "$dir"/client.err* >&2
            die "polite_fetch exited $exit_code on $name × $client"
        fi
        say "  $(head -1 "$dir/client.out" 2>/dev/null) ($((SECONDS - job_started)) s)"
        # Each value as an argument, so that a --server's text needs no quoting.
        python3 - "$dir/job.json" "$name" "$runner" "$shape" "$quota" "$states" "$model" "$a" "$b" \
            "${anchor:-}" "$job_requests" "$concurrency" "$client" "$flags" "$exit_code" \
            "$processes" <<'EOF'
import json, sys
(path, server, runner, shape, quota, states, model, a, b, anchor, requests, concurrency, client,
 flags, exit_code, processes) = sys.argv[1:]
number = lambda text: int(text) if text.isdigit() else float(text)
job = {"server": server, "runner": runner, "shape": shape, "quota": quota,
       "states_quota": states == "1", "model": model, "requests": int(requests),
       "concurrency": int(concurrency), "client": client, "flags": flags, "exit": int(exit_code),
       "processes": int(processes)}
if model in ("window", "counter"):
    job.update(q=number(a), w=number(b))
    if model == "counter":
        job.update(anchor=anchor)
else:
    job.update(r=number(a), b=number(b))
json.dump(job, open(path, "w"))
EOF
    done
done

# --- Report -----------------------------------------------------------------------------------
versions() {
    case $1 in
        nginx) nginx -v 2>&1 | sed 's/^nginx version: //' ;;
        haproxy) haproxy -v | head -1 | sed 's/^HAProxy version \([^ ]*\).*/HAProxy \1/' ;;
        express) python3 -c 'import json, sys
for name in ("express-rate-limit", "express"):
    print(name, json.load(open(sys.argv[1] + "/" + name + "/package.json"))["version"], end=", ")
print("node", sys.argv[2])' "$node_dir/node_modules" "$(node --version)" ;;
        fastify) python3 -c 'import json, sys
for name in ("@fastify/rate-limit", "fastify"):
    print(name, json.load(open(sys.argv[1] + "/" + name + "/package.json"))["version"], end=", ")
print("node", sys.argv[2])' "$node_dir/node_modules" "$(node --version)" ;;
        flexible) python3 -c 'import json, sys
print("rate-limiter-flexible", json.load(open(sys.argv[1] + "/rate-limiter-flexible/package.json"))["version"] + ", node", sys.argv[2])' "$node_dir/node_modules" "$(node --version)" ;;
        flask) "$venv/bin/python" -c "from importlib.metadata import version as v
print('Flask-Limiter', v('Flask-Limiter') + ', limits', v('limits') + ', Flask', v('Flask') + ', waitress', v('waitress'))" ;;
        slowapi) "$venv/bin/python" -c "from importlib.metadata import version as v
print('slowapi', v('slowapi') + ', limits', v('limits') + ', Starlette', v('starlette') + ', uvicorn', v('uvicorn'))" ;;
        tokenbucket) "$venv/bin/python" -c "from importlib.metadata import version as v
print('token-bucket', v('token-bucket') + ', waitress', v('waitress'))" ;;
    esac
}
echo "# Acceptance against third-party rate limiters (scripts/acceptance.sh)"
echo
echo "started $started_at, commit $(git -C "$ROOT" rev-parse --short HEAD) (src/ and examples/ as of $(git -C "$ROOT" log -1 --format=%h -- src examples))$(git -C "$ROOT" diff --quiet HEAD -- src examples 2>/dev/null || echo ' (with uncommitted changes)'), $(nproc) cores;"
own_counts=$(printf '%s\n' "${selected[@]}" | cut -d'|' -f8 | grep -c . || true)
if [ "$own_counts" = 0 ]; then
    job_note="$requests requests"
else
    job_note="each server's own request count (column job; $requests where it names none)"
fi
echo "\`$command_line\`: $job_note from $concurrency tasks a job; a fresh limiter for every job."
for runner in $runners; do
    echo "- $runner: $(versions "$runner")"
done
echo
set +e
python3 "$HERE/report.py" "$work/jobs"
verdict=$?
set -e
echo
echo "Total run time: $((SECONDS - started)) s for $job_number jobs (installs and build not counted)."
exit "$verdict"
