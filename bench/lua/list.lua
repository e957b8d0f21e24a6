-- GET /{family}[?cursor=…] : the same page every time (first page, or one deep in the tenant).
wrk.method = "GET"
wrk.path = os.getenv("BENCH_PATH")
