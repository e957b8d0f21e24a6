-- POST a sign request; "SEQ" in the body template becomes a number unique to this
-- request, so every signature covers different bytes (policy caps count each one).
local path = os.getenv("BENCH_PATH")
local template = io.open(os.getenv("BENCH_BODY")):read("*a")
local n = 0
request = function()
  n = n + 1
  local body = string.gsub(template, "SEQ", tostring((tid or 0) * 100000000 + n))
  return wrk.format("POST", path, nil, body)
end
