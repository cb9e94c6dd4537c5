from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.lock_state import LockState


T = TypeVar("T", bound="LockList")


@_attrs_define
class LockList:
    locks: list[LockState]
    next_after: None | str
    """ Pass as `after` for the next page; null on the last page. """
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        locks = []
        for locks_item_data in self.locks:
            locks_item = locks_item_data.to_dict()
            locks.append(locks_item)

        next_after: None | str
        next_after = self.next_after

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "locks": locks,
                "next_after": next_after,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.lock_state import LockState  # noqa: PLC0415

        d = dict(src_dict)
        locks = []
        _locks = d.pop("locks")
        for locks_item_data in _locks:
            locks_item = LockState.from_dict(locks_item_data)

            locks.append(locks_item)

        def _parse_next_after(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        next_after = _parse_next_after(d.pop("next_after"))

        lock_list = cls(
            locks=locks,
            next_after=next_after,
        )

        lock_list.additional_properties = d
        return lock_list

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
