"""Key escaping has one implementation, the core's; Python's `spaces.escape_key` calls it."""

from hypothesis import given
from hypothesis import strategies as st
from trajcore import _core, spaces


def test_the_rule() -> None:
    table = {"lives": "lives", "_lives": "%5Flives", "__x": "%5F_x", "a/b%": "a%2Fb%25", "x_y": "x_y", "%5F": "%255F"}
    for key, name in table.items():
        assert _core.escape_key(key) == spaces.escape_key(key) == name
        assert _core.unescape_key(name) == spaces.unescape_key(name) == key
    assert _core.unescape_key("%41%2f%") == "%41%2f%"


@given(st.text())
def test_unescape_inverts_escape(key: str) -> None:
    name = spaces.escape_key(key)
    assert spaces.unescape_key(name) == key
    assert not name.startswith("_") and "/" not in name
