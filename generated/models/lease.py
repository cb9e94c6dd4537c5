from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Lease")


@_attrs_define
class Lease:
    key: str
    """ 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone. """
    token: str
    """ The ownership token, spelled as this request sent it (tokens compare by UUID value). """
    fencing_token: int
    """ Strictly increasing per key across every ownership period; kept by renewal. """
    expires_at: datetime.datetime
    """ When the lease expires by the database's clock (UTC). """
    expires_in_ms: int
    """ Milliseconds from the database's now to `expires_at` when this answer was made
    (a replayed answer is recomputed; 0 once the lease has expired). A client that adds
    it to the monotonic time at which it first sent the request gets a local deadline
    that is never later than the real expiry, even when an acquisition recovered a lease
    granted earlier, without trusting any wall clock.
     """
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        token = self.token

        fencing_token = self.fencing_token

        expires_at = self.expires_at.isoformat()

        expires_in_ms = self.expires_in_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "token": token,
                "fencing_token": fencing_token,
                "expires_at": expires_at,
                "expires_in_ms": expires_in_ms,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        key = d.pop("key")

        token = d.pop("token")

        fencing_token = d.pop("fencing_token")

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        expires_in_ms = d.pop("expires_in_ms")

        lease = cls(
            key=key,
            token=token,
            fencing_token=fencing_token,
            expires_at=expires_at,
            expires_in_ms=expires_in_ms,
        )

        lease.additional_properties = d
        return lease

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
