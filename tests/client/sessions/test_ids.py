"""The session-ID format: one definition that issues, recognises and refuses IDs."""

from __future__ import annotations

import pytest

from ivoai.client.sessions.errors import InvalidSessionIdError
from ivoai.client.sessions.ids import check_session_id, is_session_id, new_session_id


def test_issued_ids_are_recognised_and_distinct() -> None:
    first, second = new_session_id(), new_session_id()
    assert is_session_id(first) and is_session_id(second) and first != second
    assert check_session_id(first) == first


@pytest.mark.parametrize(
    "value",
    [
        None,
        7,
        "",
        "ses_",
        "ses_" + "a" * 31,
        "ses_" + "a" * 33,
        "ses_" + "A" * 32,
        "ses_" + "g" * 32,
        "SES_" + "a" * 32,
        "ses_../" + "a" * 29,
    ],
)
def test_anything_else_is_refused(value: object) -> None:
    assert not is_session_id(value)
    if isinstance(value, str):
        with pytest.raises(InvalidSessionIdError, match="expected ses_ followed by 32 hex digits"):
            check_session_id(value)
