-- OpenBao transit sign (bench/peer.py): POST {"input": base64("bench <n>")}, a message
-- unique to each request as in sign.lua, authenticated by X-Vault-Token (common.lua's
-- Bearer header is dropped: OpenBao would read it too, and only one should be sent).
wrk.headers["Authorization"] = nil
wrk.headers["X-Vault-Token"] = os.getenv("BENCH_TOKEN")
local path = os.getenv("BENCH_PATH")
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
  n = n + 1
  local body = '{"input":"' .. base64("bench " .. tostring((tid or 0) * 100000000 + n)) .. '"}'
  return wrk.format("POST", path, nil, body)
end
