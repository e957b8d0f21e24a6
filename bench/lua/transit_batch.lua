-- OpenBao transit sign with `batch_input` of BENCH_BATCH items (bench/peer.py `--batch`):
-- each input unique, as transit.lua's. An answer with an item's error prints BENCHBAD.
wrk.headers["Authorization"] = nil
wrk.headers["X-Vault-Token"] = os.getenv("BENCH_TOKEN")
local path = os.getenv("BENCH_PATH")
local size = tonumber(os.getenv("BENCH_BATCH"))
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function sextet(v)
  return alphabet:sub(v + 1, v + 1)
end

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    out[#out + 1] = sextet(math.floor(n / 262144)) .. sextet(math.floor(n / 4096) % 64)
      .. (b and sextet(math.floor(n / 64) % 64) or "=") .. (c and sextet(n % 64) or "=")
  end
  return table.concat(out)
end

local n = 0
request = function()
  local items = {}
  for i = 1, size do
    n = n + 1
    items[i] = '{"input":"' .. base64("bench " .. tostring((tid or 0) * 100000000 + n)) .. '"}'
  end
  return wrk.format("POST", path, nil, '{"batch_input":[' .. table.concat(items, ",") .. ']}')
end
response = function(status, headers, body)
  if status == 200 and string.find(body, '"error"') then
    io.write("BENCHBAD\n")
  end
end
