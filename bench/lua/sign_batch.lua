-- POST a batch of BENCH_BATCH Dogecoin sign-message items (bench/peer.py `--batch`), each
-- message unique (as sign.lua's). An answer holding a refused item ("status" 4xx or 5xx
-- in its results) prints BENCHBAD: bench/wrk.py counts it as an error.
local path = os.getenv("BENCH_PATH")
local size = tonumber(os.getenv("BENCH_BATCH"))
local n = 0
request = function()
  local items = {}
  for i = 1, size do
    n = n + 1
    items[i] = '{"kind":"sign-message","message":"bench ' .. tostring((tid or 0) * 100000000 + n) .. '"}'
  end
  return wrk.format("POST", path, nil, '{"items":[' .. table.concat(items, ",") .. ']}')
end
response = function(status, headers, body)
  if status == 200 and string.find(body, '"status":[45]') then
    io.write("BENCHBAD\n")
  end
end
