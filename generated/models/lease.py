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
    """ The ownership token, spelled as the acquiring request spelled it. """
    fencing_token: int
    """ Strictly increasing per key across every ownership period; kept by renewal. """
    expires_at: datetime.datetime
    """ When the lease expires by the database's clock (UTC). """
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        token = self.token

        fencing_token = self.fencing_token

        expires_at = self.expires_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "token": token,
                "fencing_token": fencing_token,
                "expires_at": expires_at,
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

        lease = cls(
            key=key,
            token=token,
            fencing_token=fencing_token,
            expires_at=expires_at,
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
