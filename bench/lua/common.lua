-- Shared by every scenario (prepended by bench/wrk.py): auth header, a
-- per-thread random seed, and a JSON summary line that bench/wrk.py parses.
local token = os.getenv("BENCH_TOKEN")
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Content-Type"] = "application/json"

local thread_count = 0
function setup(thread)
  thread_count = thread_count + 1
  thread:set("tid", thread_count)
end

function seed()
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919 + math.floor(os.clock() * 1e6))
end

-- Names to look up (one per line), shuffled: every thread starts elsewhere.
function load_names()
  local names = {}
  for line in io.lines(os.getenv("BENCH_NAMES")) do
    if #line > 0 then names[#names + 1] = line end
  end
  return names
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCHJSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,' ..
    '"write":%d,"status":%d,"timeout":%d},"latency_us":{"p50":%d,"p90":%d,"p99":%d,' ..
    '"max":%d,"mean":%.1f}}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
