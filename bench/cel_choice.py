"""How the CEL libraries of PyPI were compared (docs/policies.md, "Which CEL library").

Not part of the suite: the two libraries not chosen are not dependencies. In a venv of
its own: pip install cel-expr-python==0.1.3 common-expression-language==0.10.0
cel-python==0.5.0 protobuf, then `python bench/cel_choice.py LIBRARY` for each; the
conformance cases are the CEL features chainkeys' conditions use.
"""

# mypy: ignore-errors
# ruff: noqa
import datetime

cases = [
    ("map index + in", "'uatom' in m && m['uatom'] > 5", True),
    ("missing key is an error", "m['uosmo'] > 5", "error"),
    ("exists macro", "l.exists(p, p == 'channel-141')", True),
    ("all macro", "l.all(p, p.startsWith('channel-'))", True),
    ("timestamp getDayOfWeek", "now.getDayOfWeek('UTC') == 5", True),
    ("string contains", "s.contains('pay')", True),
    ("int overflow is an error", "i * i > 0", "error"),
    ("size()", "size(l) == 2", True),
    ("undeclared is a compile error", "nope == 1", "compile-error"),
    ("type error is a compile error", "i > 'a'", "compile-error"),
]
data = {
    "m": {"uatom": 10},
    "l": ["channel-141", "channel-7"],
    "now": datetime.datetime(2026, 11, 27, 12, tzinfo=datetime.timezone.utc),
    "s": "payout 7",
    "i": 2**62,
}
import sys

lib = sys.argv[1]
for name, expr, want in cases:
    got = None
    try:
        if lib == "cel-expr-python":
            from cel_expr_python import cel

            env = cel.NewEnv(
                variables={
                    "m": cel.Type.Map(cel.Type.STRING, cel.Type.INT),
                    "l": cel.Type.List(cel.Type.STRING),
                    "now": cel.Type.TIMESTAMP,
                    "s": cel.Type.STRING,
                    "i": cel.Type.INT,
                }
            )
            try:
                e = env.compile(expr)
            except Exception:
                got = "compile-error"
            if got is None:
                v = e.eval(data=data)
                got = "error" if v.type().name() == "ERROR" else v.plain_value()
        elif lib == "common-expression-language":
            import cel

            try:
                p = cel.compile(expr)
            except Exception:
                got = "compile-error"
            if got is None:
                try:
                    got = p.execute(data)
                except Exception:
                    got = "error"
        else:
            import celpy

            env = celpy.Environment()
            try:
                ast = env.compile(expr)
                prg = env.program(ast)
            except Exception:
                got = "compile-error"
            if got is None:
                try:
                    r = prg.evaluate(
                        {
                            k: celpy.json_to_cel(v)
                            if k != "now"
                            else celpy.celtypes.TimestampType(v)
                            for k, v in data.items()
                        }
                    )
                    got = (
                        "error"
                        if isinstance(r, celpy.CELEvalError)
                        else bool(r)
                        if isinstance(r, celpy.celtypes.BoolType)
                        else r
                    )
                except Exception as ex:
                    got = "error"
    except Exception as ex:
        got = f"crash {type(ex).__name__}"
    print(
        f"{lib:28} {name:32} want={want!s:14} got={got!s:14} {'ok' if str(got) == str(want) else 'DIFF'}"
    )
