-- POST /{family} {} : a generated key.
wrk.method = "POST"
wrk.path = os.getenv("BENCH_PATH")
wrk.body = "{}"
