-- GET /{family}/{name}, names drawn at random from a preloaded sample.
local prefix = os.getenv("BENCH_PATH") .. "/"
local names

function init(args)
  seed()
  names = load_names()
end

function request()
  return wrk.format("GET", prefix .. names[math.random(1, #names)])
end
