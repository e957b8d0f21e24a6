-- 80% GET /{family}/{name} of preloaded accounts, 20% POST /{family} {} (generated key).
local path = os.getenv("BENCH_PATH")
local prefix = path .. "/"
local names

function init(args)
  seed()
  names = load_names()
end

function request()
  if math.random() < 0.8 then
    return wrk.format("GET", prefix .. names[math.random(1, #names)])
  end
  return wrk.format("POST", path, nil, "{}")
end
