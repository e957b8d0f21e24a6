-- POST /{family} {"private_key": <fresh random 64 hex>} : an import of a new key.
local path = os.getenv("BENCH_PATH")

function init(args)
  seed()
end

function request()
  -- The first word stays below 0x7fffffff, so the key is below the curve order.
  local key = string.format("%08x", math.random(1, 0x7ffffffe))
  for _ = 1, 7 do
    key = key .. string.format("%04x%04x", math.random(0, 0xffff), math.random(0, 0xffff))
  end
  return wrk.format("POST", path, nil, '{"private_key":"' .. key .. '"}')
end
