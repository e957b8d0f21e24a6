"""Each family's display units (its registry row's `units`): the integers people approve
are named by what they count (litoshi, koinu, uatom, units of 0.0001 EOS), never by the
coin's ticker, which would read as whole coins (issue 55, item 1)."""

from __future__ import annotations

import pytest

from chainkeys.chains.registry import FAMILIES
from chainkeys.chains.tx.base import Amount, amount_record
from chainkeys.chains.tx.units import unit_of

# family -> the denoms its decoders give amounts in, each with the decimals a transaction
# may carry (None: the denom alone), and the base unit's name people must read
AMOUNTS: dict[str, list[tuple[str, int | None, str]]] = {
    "cosmos": [
        ("uatom", None, "uatom"),
        ("uosmo", None, "uosmo"),
        (
            "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2",
            None,
            "ibc/27394FB092D2ECCD56123C74F36E4C1F926001CEADA9CA97EA622B25F41E5EB2",
        ),
    ],
    "dogecoin": [("DOGE", None, "koinu")],
    "eos": [
        ("eosio.token:EOS", 4, "units of 0.0001 EOS"),
        ("eosio.token:WAX", 8, "units of 0.00000001 WAX"),
        ("eosio.token:EOS", None, "base units of eosio.token:EOS"),
    ],
    "litecoin": [("LTC", None, "litoshi")],
}


def _tickers() -> set[str]:
    """Every display unit of every family's table: a coin's ticker."""
    out = {u.display for f in FAMILIES.values() for u in f.units.known.values()}
    return {t.upper() for t in out if t} | {"EOS", "WAX"}


def test_every_family_is_in_the_table() -> None:
    assert set(AMOUNTS) == set(FAMILIES)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_base_unit_is_never_the_coins_ticker(family: str) -> None:
    units = FAMILIES[family].units
    tickers = _tickers()
    for denom, decimals, base in AMOUNTS[family]:
        unit = units.of(denom, decimals)
        assert unit.base == base
        assert unit.base.upper() not in tickers and unit.base != unit.display
    for denom, unit in units.known.items():  # every row the family declares
        assert unit.base.upper() not in tickers, (family, denom)
        assert unit.display is not None and unit.decimals is not None


def test_amounts_are_shown_in_both_units() -> None:
    ltc = Amount.of("LTC", 900_000, unit_of("litecoin", "LTC"))
    assert amount_record(ltc) == {
        "denom": "LTC",
        "amount": "900000",
        "base_unit": "litoshi",
        "display": "0.009 LTC",
    }
    assert ltc.words() == "900000 litoshi (0.009 LTC)"
    assert ltc.words(300_000_000) == "300000000 litoshi (3 LTC)"
    doge = Amount.of("DOGE", 100_000, unit_of("dogecoin", "DOGE"))
    assert doge.words() == "100000 koinu (0.001 DOGE)"
    atom = Amount.of("uatom", 6000, unit_of("cosmos", "uatom"))
    assert amount_record(atom)["base_unit"] == "uatom" and atom.words() == "6000 uatom (0.006 ATOM)"
    voucher = Amount.of("ibc/ABC", 5, unit_of("cosmos", "ibc/ABC"))
    assert amount_record(voucher) == {"denom": "ibc/ABC", "amount": "5", "base_unit": "ibc/ABC"}
    eos = Amount.of("eosio.token:EOS", 150_000, FAMILIES["eos"].units.of("eosio.token:EOS", 4))
    assert eos.words() == "150000 units of 0.0001 EOS (15 EOS)"
    whole = FAMILIES["eos"].units.of("eosio.token:NFT", 0)
    assert Amount.of("eosio.token:NFT", 3, whole).words() == "3 units of 1 NFT (3 NFT)"
