"""Arguments are checked before anything is sent."""

from __future__ import annotations

import pytest

from volcano_sdk._validation import check_key, check_ttl, check_uuid_string


@pytest.mark.parametrize("key", ["a", "daily-report", "a/b:c.d-e_f", "...", "x" * 255])
def test_valid_keys_pass_unchanged(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["", ".", "..", "x" * 256, "a b", "a%2F", "é", "a\n"])
def test_invalid_keys_raise_value_error(key: str) -> None:
    with pytest.raises(ValueError, match="key"):
        check_key(key)


@pytest.mark.parametrize("key", [None, 1, b"key"])
def test_non_str_keys_raise_type_error(key: object) -> None:
    with pytest.raises(TypeError, match="key must be a str"):
        check_key(key)


@pytest.mark.parametrize("ttl", [5, 30, 7_776_000])
def test_ttl_bounds_are_inclusive(ttl: int) -> None:
    assert check_ttl(ttl) == ttl


@pytest.mark.parametrize("ttl", [4, 0, -5, 7_776_001])
def test_ttl_out_of_range_raises_value_error(ttl: int) -> None:
    with pytest.raises(ValueError, match="from 5 to 7776000"):
        check_ttl(ttl)


@pytest.mark.parametrize("ttl", [True, False, 30.0, "30", None])
def test_ttl_of_another_type_raises_type_error(ttl: object) -> None:
    with pytest.raises(TypeError, match="ttl must be an int"):
        check_ttl(ttl)


def test_uuid_spelling_is_kept_exactly() -> None:
    upper = "6B29FC40-CA47-1067-B31D-00DD010662DA"
    assert check_uuid_string(upper, "token") is upper


@pytest.mark.parametrize(
    "value",
    [
        "",
        "not-a-uuid",
        "6b29fc40ca471067b31d00dd010662da",
        "{6b29fc40-ca47-1067-b31d-00dd010662da}",
    ],
)
def test_malformed_uuid_raises_without_echoing_it(value: str) -> None:
    with pytest.raises(ValueError) as info:
        check_uuid_string(value, "token")
    assert value not in str(info.value) or value == ""


def test_uuid_object_is_a_type_error_that_says_what_to_do() -> None:
    import uuid

    with pytest.raises(TypeError, match=r"str\(uuid4\(\)\)"):
        check_uuid_string(uuid.uuid4(), "token")
