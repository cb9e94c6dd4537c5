from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RenewBatchItem")


@_attrs_define
class RenewBatchItem:
    key: str
    """ 1 to 255 characters from `A-Z a-z 0-9 - _ . : /`, except `.` and `..` alone. """
    token: str
    """ A UUID in the 8-4-4-4-12 hexadecimal form, any letter case. Its spelling is kept as sent. """
    ttl: int
    """ Lease duration in whole seconds, 5 to 7776000 (90 days). """
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        token = self.token

        ttl = self.ttl

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "token": token,
                "ttl": ttl,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        key = d.pop("key")

        token = d.pop("token")

        ttl = d.pop("ttl")

        renew_batch_item = cls(
            key=key,
            token=token,
            ttl=ttl,
        )

        renew_batch_item.additional_properties = d
        return renew_batch_item

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
