"""`chainkeys policy` as an operator uses it, against the database a running server uses:
validation errors name the field, TOML works, every version is kept and audited, and a
change reaches the running server within 10 s without a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.api.tenants import Tenant
from tests.api.test_policies import SEND, send
from tests.api.test_sign_cosmos import OTHER, PRIVATE
from tests.conftest import Server, chainkeys_cli
from tests.masterkey.test_rotation import env_of

from chainkeys import clock
from chainkeys.policies.document import PolicyError, parse
from chainkeys.tokens.service import SCOPES

pytestmark = pytest.mark.long(15)  # seconds (busy run): scheduled first

GOOD = {
    "rules": [
        {
            "family": "cosmos",
            "network": "cosmoshub",
            "recipients": [OTHER],
            "max_per_tx": {"uatom": "1000000"},
            "max_per_day": {"uatom": "5000000"},
        }
    ]
}
TOML = f"""
[[rules]]
family = "cosmos"
network = "cosmoshub"
recipients = ["{OTHER}"]
max_per_tx = {{ uatom = "1000000" }}
"""


@pytest.fixture
def tenant(server: Server) -> Iterator[Tenant]:
    made = Tenant(server)
    yield made
    made.client.close()


def test_every_invalid_field_is_named_at_once() -> None:
    """An operator fixes the file in one go: every invalid rule is named, shape errors
    and value errors alike (issue 55)."""
    for rules, says in [
        (
            [
                {"family": "cosmoss"},
                {"family": "cosmos", "max_per_tx": {"uatom": "1.5"}},
                {"family": "cosmos", "effect": "maybe"},
            ],
            ["rules[0].family", "rules[1].max_per_tx.uatom", "rules[2].effect"],
        ),
        (
            [{"family": "cosmos", "bogus": 1}, {"family": 5}, {"family": "eos"}],
            ["rules[0].bogus", "rules[1].family"],
        ),
    ]:
        with pytest.raises(PolicyError) as refused:
            parse(json.dumps({"rules": rules}))
        for word in says:
            assert word in refused.value.message, refused.value.message


@pytest.mark.parametrize(
    ("rules", "says"),
    [
        ([{"family": "cosmoss"}], "rules[0].family: 'cosmoss' is not one of cosmos"),
        (
            [{"family": "cosmos", "network": "mainnet"}],
            "rules[0].network: 'mainnet' is not a cosmos",
        ),
        (
            [{"family": "eos"}, {"family": "cosmos", "max_per_tx": {"uatom": "1.5"}}],
            "rules[1].max_per_tx.uatom: '1.5' is not a whole number",
        ),
        ([{"family": "cosmos", "max_per_day": {"uatom": 5}}], "rules[0].max_per_day.uatom"),
        ([{"family": "cosmos", "recipients": ["cosmos1notanaddress"]}], "rules[0].recipients[0]"),
        (
            [{"family": "dogecoin", "recipients": ["LKqJxEKxN7SnCEpj3ia3Z9DuAD1HNjh1hx"]}],
            "rules[0].recipients[0]",
        ),
        (
            [{"family": "cosmos", "recipient": [OTHER]}],
            'rules[0].recipient: not a key of a rule (did you mean "recipients"?)',
        ),
        (
            [{"family": "cosmos", "approval": {"quorom": 2, "group": "t"}}],
            'rules[0].approval.quorom: not a key of an approval (did you mean "quorum"?)',
        ),
        (
            [{"family": "cosmos", "effect": "alow"}],
            'rules[0].effect: allow or deny (did you mean "allow"?)',
        ),
        (
            [{"family": "litecoin", "network": "mainet"}],
            'network (mainnet, testnet, regtest) (did you mean "mainnet"?)',
        ),
        ([{"family": "dogecoin", "messages": ["x"]}], "rules[0].messages: only cosmos rules"),
        ([{"family": "cosmos"}, {"family": "cosmos"}], "rules[1]: rules[0] already covers cosmos"),
    ],
)
def test_invalid_files_name_the_field(rules: list[dict[str, object]], says: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse(json.dumps({"rules": rules}))
    assert says in refused.value.message


# Defects an operator makes, each with the path and words the refusal must name.
DEFECTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "typo": ({"recipent": [OTHER]}, ["{at}.recipent", 'did you mean "recipients"']),
    "cap key": ({"max_per_txn": {"uatom": "5"}}, ["{at}.max_per_txn", 'did you mean "max_per_tx"']),
    "cap value": ({"max_per_day": {"uatom": "1.5"}}, ["{at}.max_per_day.uatom"]),
    "effect": ({"effect": "alow"}, ["{at}.effect", 'did you mean "allow"']),
    "network": ({"network": "cosmoshubb"}, ["{at}.network", 'did you mean "cosmoshub"']),
    "type": ({"raw_messages": "yes"}, ["{at}.raw_messages"]),
    "approval": ({"approval": {"quorom": 2, "group": "t"}}, ["{at}.approval.quorom"]),
    "recipient": ({"recipients": ["cosmos1notanaddress"]}, ["{at}.recipients[0]"]),
    "when": ({"when": "tx.fmaily == 1"}, ["{at}.when"]),
}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    rules=st.lists(st.sets(st.sampled_from(sorted(DEFECTS)), max_size=4), min_size=1, max_size=6),
    stray=st.sampled_from([None, "rule", "Rules", "version"]),
)
def test_every_problem_of_every_rule_is_named_at_once(
    rules: list[set[str]], stray: str | None
) -> None:
    """Whatever mix of mistakes a file holds, one answer names each, with its path and
    a "did you mean" for a near-miss of a known key or value; a rule without mistakes
    is not mentioned (issue 67)."""
    document: dict[str, Any] = {"rules": []}
    expected: list[str] = []
    for i, defects in enumerate(rules):
        rule: dict[str, Any] = {"family": "cosmos", "when": "true"}  # a when: never a duplicate
        for name in sorted(defects):
            part, words = DEFECTS[name]
            rule.update(part)
            expected += [w.format(at=f"rules[{i}]") for w in words]
        document["rules"].append(rule)
    if stray is not None:
        document[stray] = 1
        expected.append(f"{stray}: not a key of a policy")
    if not expected:
        parse(json.dumps(document))  # no mistake: accepted
        return
    with pytest.raises(PolicyError) as refused:
        parse(json.dumps(document))
    said = refused.value.problems
    assert "; ".join(said) == refused.value.message
    for words_of_one in expected:
        assert any(words_of_one in problem for problem in said), (words_of_one, said)
    for i, defects in enumerate(rules):
        if not defects:
            assert not any(f"rules[{i}]." in problem for problem in said), said
    if stray in ("rule", "Rules"):
        assert any('did you mean "rules"' in problem for problem in said), said


def test_a_file_that_is_not_a_policy_says_what_a_policy_is() -> None:
    for document, says in [
        (
            {"rule": [{"family": "cosmos"}]},
            [
                'rule: not a key of a policy ({"rules": [...]}) (did you mean "rules"?)',
                'rules: is required in a policy ({"rules": [...]})',
            ],
        ),
        (
            [{"family": "cosmos"}],
            ['the file: must be a policy ({"rules": [...]}) (an object), not an array'],
        ),
        ({"rules": {"family": "cosmos"}}, ["rules: must be an array, not an object"]),
        ({"rules": ["cosmos"]}, ["rules[0]: must be a rule (an object), not a string"]),
        ({"rules": [{"network": "cosmoshub"}]}, ["rules[0].family: is required in a rule"]),
    ]:
        with pytest.raises(PolicyError) as refused:
            parse(json.dumps(document))
        assert list(refused.value.problems) == says


def test_the_cli_refuses_a_bad_file_in_one_line_and_changes_nothing(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    env = env_of(server.settings)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"rules": [{"family": "cosmos", "max_per_tx": {"uatom": "1e6"}}]}))
    done = chainkeys_cli("policy", "set", tenant.name, str(path), env=env)
    assert done.returncode == 1
    assert done.stderr == (
        "chainkeys: rules[0].max_per_tx.uatom: '1e6' is not a whole number of the smallest "
        'unit (a decimal string such as "1000000")\n'
    )
    (tmp_path / "bad.toml").write_text("[[rules]\nfamily = 1")
    done = chainkeys_cli("policy", "set", tenant.name, str(tmp_path / "bad.toml"), env=env)
    assert done.returncode == 1 and done.stderr.startswith(
        "chainkeys: the policy is not valid TOML"
    )
    shown = chainkeys_cli("policy", "show", tenant.name, env=env)
    assert "has no policy" in shown.stdout


def test_the_cli_lists_every_problem_one_a_line_and_changes_nothing(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    env = env_of(server.settings)
    path = tmp_path / "policy.json"
    path.write_text(
        json.dumps(
            {
                "rule": [],
                "rules": [
                    {"family": "cosmos", "recipent": [OTHER], "max_per_tx": {"uatom": "1e6"}},
                    {"family": "eos", "network": "eos"},
                    {"family": "dogecoin", "effect": "alow", "max_per_dayy": {"DOGE": "5"}},
                ],
            }
        )
    )
    for command in (["set", tenant.name, str(path)], ["test", tenant.name, str(path), str(path)]):
        done = chainkeys_cli("policy", *command, env=env)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.splitlines() == [
            "chainkeys: the policy has 5 problems:",
            '  rule: not a key of a policy ({"rules": [...]}) (did you mean "rules"?)',
            '  rules[0].recipent: not a key of a rule (did you mean "recipients"?)',
            "  rules[0].max_per_tx.uatom: '1e6' is not a whole number of the smallest unit "
            '(a decimal string such as "1000000")',
            '  rules[2].max_per_dayy: not a key of a rule (did you mean "max_per_day"?)',
            '  rules[2].effect: allow or deny (did you mean "allow"?)',
        ], done.stderr
    assert (
        json.loads(chainkeys_cli("policy", "show", tenant.name, "--json", env=env).stdout)["policy"]
        is None
    )


def test_what_show_prints_set_takes_back(server: Server, tenant: Tenant, tmp_path: Path) -> None:
    """`policy show T > p.json`, edit, `policy set T p.json` (issue 67): show's stdout is
    the document alone; its version line is on stderr."""
    env = env_of(server.settings)
    (tmp_path / "p.toml").write_text(TOML)
    assert (
        chainkeys_cli("policy", "set", tenant.name, str(tmp_path / "p.toml"), env=env).returncode
        == 0
    )
    shown = chainkeys_cli("policy", "show", tenant.name, env=env)
    assert shown.stderr.startswith("# version 1, set ")
    for name in ("shown.json", "shown"):  # by extension, and by its first character
        (tmp_path / name).write_text(shown.stdout)
        again = chainkeys_cli("policy", "set", tenant.name, str(tmp_path / name), env=env)
        assert again.returncode == 0 and "set for tenant" in again.stdout, again.stderr
        assert chainkeys_cli("policy", "show", tenant.name, env=env).stdout == shown.stdout
    older = tmp_path / "older.json"  # what show printed before: its version line first
    older.write_text(shown.stderr + shown.stdout)
    refused = chainkeys_cli("policy", "set", tenant.name, str(older), env=env)
    assert refused.returncode == 1
    assert "a line starting with # is not JSON" in refused.stderr and "remove it" in refused.stderr
    history = chainkeys_cli("policy", "history", tenant.name, env=env).stdout.splitlines()
    assert [line.split()[0] for line in history[1:]] == ["1", "2", "3"]


def test_set_show_history_clear_and_audit(server: Server, tenant: Tenant, tmp_path: Path) -> None:
    env = env_of(server.settings)
    (tmp_path / "p.json").write_text(json.dumps(GOOD))
    (tmp_path / "p.toml").write_text(TOML)
    assert (
        "version 1 set"
        in chainkeys_cli("policy", "set", tenant.name, str(tmp_path / "p.json"), env=env).stdout
    )
    shown = chainkeys_cli("policy", "show", tenant.name, env=env)
    assert shown.stderr.startswith("# version 1")
    assert json.loads(shown.stdout)["rules"][0]["max_per_day"] == {"uatom": "5000000"}
    assert (
        "version 2 set"
        in chainkeys_cli("policy", "set", tenant.name, str(tmp_path / "p.toml"), env=env).stdout
    )
    toml_rule = json.loads(chainkeys_cli("policy", "show", tenant.name, env=env).stdout)["rules"][0]
    assert "max_per_day" not in toml_rule and toml_rule["max_per_tx"] == {"uatom": "1000000"}
    assert "version 3" in chainkeys_cli("policy", "clear", tenant.name, env=env).stdout
    assert "cleared in version 3" in chainkeys_cli("policy", "show", tenant.name, env=env).stdout
    history = chainkeys_cli("policy", "history", tenant.name, env=env).stdout.splitlines()
    assert [line.split()[0] for line in history[1:]] == ["1", "2", "3"]
    assert history[3].split()[-1] == "cleared"
    first = chainkeys_cli("policy", "history", tenant.name, "--version", "1", env=env).stdout
    assert json.loads(first)["rules"][0]["max_per_day"] == {"uatom": "5000000"}
    audit = chainkeys_cli("audit", "--tenant", tenant.name, env=env).stdout
    assert [w for line in audit.splitlines() for w in line.split() if w.startswith("policy.")] == [
        "policy.set",
        "policy.set",
        "policy.clear",
    ]
    missing = chainkeys_cli("policy", "show", "no-such-tenant", env=env)
    assert missing.returncode == 1 and "no tenant named no-such-tenant" in missing.stderr


def test_a_change_reaches_a_running_server_within_10_seconds(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    env = env_of(server.settings)
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    tenant.allowed(SEND, send(10))  # the server has now read "no policy"
    (tmp_path / "deny.json").write_text(json.dumps({"rules": [{"family": "eos"}]}))
    assert (
        chainkeys_cli("policy", "set", tenant.name, str(tmp_path / "deny.json"), env=env).returncode
        == 0
    )
    # 10 s of the server's clock (it runs in this process: its clock is moved, not waited for)
    with clock.shift(10_000):
        assert tenant.sign(SEND, send(10)).status_code == 403, "not applied within 10 s"
        assert chainkeys_cli("policy", "clear", tenant.name, env=env).returncode == 0
        with clock.shift(10_000):
            assert tenant.sign(SEND, send(10)).status_code == 200, "not cleared within 10 s"


def test_policy_test_tries_a_candidate_before_it_is_set(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    """`chainkeys policy test TENANT FILE REQUEST.json`: the decision, the deciding rule
    and every when's value, for a candidate policy; nothing set, nothing signed."""
    from tests.api.test_sign_cosmos import ADDRESS

    env = env_of(server.settings)
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    candidate = tmp_path / "candidate.json"
    candidate.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "family": "cosmos",
                        "effect": "deny",
                        "name": "weekends",
                        "when": "now.getDayOfWeek('UTC') in [0, 6]",
                    },
                    {
                        "family": "cosmos",
                        "when": "token.label == 'payouts'",
                        "max_per_tx": {"uatom": "50"},
                    },
                ]
            }
        )
    )
    asked = tmp_path / "request.json"
    for label, amount, decision in (
        ("payouts", 10, "allow"),
        ("payouts", 60, "deny"),
        ("other", 10, "deny"),
    ):
        asked.write_text(
            json.dumps(
                {
                    "family": "cosmos",
                    "account": ADDRESS,
                    "kind": "sign-transfer",
                    "request": send(amount, fee=0),
                    "token": {"label": label},
                }
            )
        )
        done = chainkeys_cli("policy", "test", tenant.name, str(candidate), str(asked), env=env)
        out = json.loads(done.stdout)
        weekend = out["rules"][0]["value"]
        assert out["decision"] == ("deny" if weekend else decision), out
        assert done.returncode == EXIT[out["decision"]], done.stderr
        assert out["rules"][1]["value"] is (label == "payouts")
    shown = chainkeys_cli("policy", "show", tenant.name, "--json", env=env)
    assert json.loads(shown.stdout)["policy"] is None  # the candidate was not set
    assert tenant.sign_events() == []  # nothing was signed
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"family": "cosmos", "when": "tx.fmaily == 1"}]}))
    refused = chainkeys_cli("policy", "test", tenant.name, str(bad), str(asked), env=env)
    assert refused.returncode == 1 and "line 1, column 3" in refused.stderr


EXIT = {"allow": 0, "deny": 3, "approval": 4}  # `chainkeys policy test --help` documents them


def test_policy_test_exits_by_decision_and_names_the_token_it_assumed(
    server: Server, tenant: Tenant, tmp_path: Path
) -> None:
    """A CI step gates on the exit status (0 allow, 3 deny, 4 approval, 1 an error); a
    request file without "token" is tried as a token it prints (stderr), which is what
    token conditions see (here: no label, so the payouts cap does not apply)."""
    from tests.api.test_sign_cosmos import ADDRESS

    env = env_of(server.settings)
    assert tenant.client.post("/cosmos", json={"private_key": PRIVATE}).status_code == 200
    candidate = tmp_path / "candidate.json"
    candidate.write_text(
        json.dumps(
            {
                "rules": [
                    {
                        "family": "cosmos",
                        "effect": "deny",
                        "name": "no-huge",
                        "when": "'uatom' in tx.total && tx.total['uatom'] > 1000",
                    },
                    {
                        "family": "cosmos",
                        "when": "token.label == 'payouts'",
                        "max_per_tx": {"uatom": "50"},
                    },
                    {
                        "family": "cosmos",
                        "approval": {"quorum": 1, "group": "treasury"},
                        "above": {"uatom": "100"},
                    },
                ]
            }
        )
    )
    asked = tmp_path / "request.json"

    def test(amount: int, token: dict[str, object] | None) -> tuple[int, dict[str, Any], str]:
        body = {
            "family": "cosmos",
            "account": ADDRESS,
            "kind": "sign-transfer",
            "request": send(amount, fee=0),
        }
        if token is not None:
            body["token"] = token
        asked.write_text(json.dumps(body))
        done = chainkeys_cli("policy", "test", tenant.name, str(candidate), str(asked), env=env)
        return done.returncode, json.loads(done.stdout), done.stderr

    payouts: dict[str, object] = {
        "label": "payouts",
        "scopes": ["sign"],
        "families": ["cosmos"],
        "id": "tok_1",
    }
    for amount, token, decision in (
        (10, payouts, "allow"),
        (60, payouts, "deny"),
        (5000, payouts, "deny"),
        (60, None, "allow"),
        (500, None, "approval"),
    ):
        status, out, stderr = test(amount, token)
        assert (out["decision"], status) == (decision, EXIT[decision]), (amount, token, out)
        if token is None:  # said which token it assumed, and showed it in the answer
            assert out["token"] == {"id": "", "label": "", "scopes": sorted(SCOPES), "families": []}
            assert f'{asked} gives no "token": assumed the token {{"id":"","label":""' in stderr
            assert out["rules"][1]["value"] is False  # token.label == 'payouts' on ""
        else:
            assert out["token"] == payouts and stderr == ""
    status, out, stderr = test(10, {"label": "payouts"})
    assert status == 0 and 'no id, scopes, families in "token"' in stderr
    help_text = chainkeys_cli("policy", "test", "--help", env=env).stdout
    assert "0 allow, 3 deny, 4 approval needed" in " ".join(help_text.split())
    missing = chainkeys_cli(
        "policy", "test", tenant.name, str(candidate), str(tmp_path / "no.json"), env=env
    )
    assert missing.returncode == 1  # an error is 1, never a decision's code
